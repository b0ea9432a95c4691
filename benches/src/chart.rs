//! The SVG chart: throughput against threads, one panel per scenario, one line per algorithm,
//! peer and floor, on a log scale (the floors run far above the limiters), one shared legend.

use plotters::prelude::*;

use crate::report::{Report, SUBJECT_ORDER};

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(255, 127, 14),
    RGBColor(227, 119, 194),
    RGBColor(90, 90, 90),
    RGBColor(170, 170, 170),
    RGBColor(60, 60, 60),
];

fn color_of(subject: &str) -> RGBColor {
    let i = SUBJECT_ORDER.iter().position(|&s| s == subject).unwrap_or(0);
    COLORS[i % COLORS.len()]
}

/// Renders the chart as an SVG document.
pub fn render_svg(report: &Report) -> Result<String, Box<dyn std::error::Error>> {
    let panels = report.scenarios.len().max(1);
    let cols = 2;
    let rows = panels.div_ceil(cols);
    let (w, h) = (1280u32, 320 * rows as u32 + 60);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        let title = format!(
            "kova-bench: decisions/s against threads ({}, {} cores, {}, {} run)",
            report.machine.cpu, report.machine.cores, report.machine.date, report.settings.mode
        );
        let (top, body) = root.split_vertically(50);
        top.titled(&title, ("sans-serif", 20))?;
        let (grid, legend) = body.split_horizontally(w - 200);
        draw_legend(&legend, report)?;
        let max_threads = report.settings.threads.iter().copied().max().unwrap_or(1);
        let (x_lo, x_hi) = if max_threads > 1 { (1.0, max_threads as f64) } else { (0.5, 1.5) };
        for (area, scenario) in grid.split_evenly((rows, cols)).iter().zip(&report.scenarios) {
            let records: Vec<_> = report.records.iter().filter(|r| r.scenario == scenario.name).collect();
            let values = records.iter().map(|r| r.ops_per_sec / 1e6).filter(|v| *v > 0.0);
            let y_max = values.clone().fold(0.0, f64::max).max(1e-3) * 1.6;
            let y_min = values.fold(f64::INFINITY, f64::min).min(y_max / 10.0) / 1.6;
            let mut chart = ChartBuilder::on(area)
                .caption(&scenario.name, ("sans-serif", 17))
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(55)
                .build_cartesian_2d(x_lo..x_hi, (y_min..y_max).log_scale())?;
            chart
                .configure_mesh()
                .x_desc("threads")
                .y_desc("M decisions/s (log)")
                .x_labels(max_threads.min(16) + 1)
                .y_labels(6)
                .light_line_style(WHITE)
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| if *y >= 10.0 { format!("{y:.0}") } else { format!("{y:.1}") })
                .draw()?;
            for subject in SUBJECT_ORDER {
                let mut points: Vec<(f64, f64)> = records
                    .iter()
                    .filter(|r| r.subject == subject && r.ops_per_sec > 0.0)
                    .map(|r| (r.threads as f64, r.ops_per_sec / 1e6))
                    .collect();
                if points.is_empty() {
                    continue;
                }
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                let color = color_of(subject);
                let dashed = subject.starts_with("floor");
                let style = ShapeStyle::from(&color).stroke_width(if dashed { 1 } else { 2 });
                chart.draw_series(LineSeries::new(points.clone(), style))?;
                chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
            }
        }
        root.present()?;
    }
    Ok(svg)
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    report: &Report,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let present: Vec<&str> =
        SUBJECT_ORDER.iter().copied().filter(|s| report.records.iter().any(|r| r.subject == *s)).collect();
    for (i, subject) in present.iter().enumerate() {
        let y = 40 + 24 * i as i32;
        let color = color_of(subject);
        area.draw(&PathElement::new(vec![(10, y), (36, y)], ShapeStyle::from(&color).stroke_width(3)))?;
        area.draw(&Text::new(subject.to_string(), (44, y - 7), ("sans-serif", 14)))?;
    }
    Ok(())
}
