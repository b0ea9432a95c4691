//! The SVG chart: one panel per scenario, the subjects side by side as grouped bars at each
//! measured thread count, on a log scale (the slowest and fastest subjects differ a hundredfold).
//! kova's algorithms are shades of one blue, each peer has its own colour, and the floors are
//! lines across the bars of their group, not bars, each floor in its own dash (two can share a
//! panel: a scenario's floor and the CAS behind kova's pin).

use plotters::coord::combinators::BindKeyPoints;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::report::{Record, Report, SubjectKind, PINNED_FLOOR, SUBJECT_ORDER};

/// The colour of a subject's bars or line.
pub fn color_of(subject: &str) -> RGBColor {
    match subject {
        // kova: one blue family, darkest first.
        "token_bucket" => RGBColor(8, 48, 107),
        "gcra" => RGBColor(8, 81, 156),
        "fixed_window" => RGBColor(33, 113, 181),
        "sliding_window_counter" => RGBColor(66, 146, 198),
        "sliding_window_log" => RGBColor(120, 170, 215),
        // kova's striped mode: teal, beside the blues.
        "token_bucket_striped" => RGBColor(0, 109, 119),
        "gcra_striped" => RGBColor(42, 157, 143),
        // The table without its doorkeeper, and the sketch: blues beside the algorithms'.
        crate::kova_tables::GCRA_NO_DOOR => RGBColor(158, 202, 225),
        crate::sketch_subject::SKETCH => RGBColor(0, 150, 199),
        // Peers: warm and distinct colours, none blue.
        "governor" => RGBColor(230, 85, 13),
        // governor's fast configuration: a lighter shade of its orange.
        crate::governor_tuned::GOVERNOR_TUNED => RGBColor(253, 174, 107),
        "mutex_bucket" => RGBColor(140, 86, 75),
        "ratelimit" => RGBColor(44, 160, 44),
        "ratelimit_std" => RGBColor(150, 215, 120),
        "leaky_bucket" => RGBColor(148, 103, 189),
        crate::report::PINGORA => RGBColor(214, 39, 40),
        // Floors: black and grey lines.
        PINNED_FLOOR => RGBColor(130, 130, 130),
        _ => RGBColor(20, 20, 20),
    }
}

/// How a floor's line is drawn: `(dash, gap, width)` in pixels. Each floor has its own, so that
/// the two lines of one panel (the scenario's floor and [`PINNED_FLOOR`]) and the legend tell
/// them apart without colour.
pub fn floor_dash(subject: &str) -> (u32, u32, u32) {
    match subject {
        "floor_cas" => (8, 4, 2),
        "floor_read" => (14, 4, 2),
        crate::subject::LOAD_FLOOR => (3, 6, 2),
        // Dotted.
        PINNED_FLOOR => (2, 3, 3),
        _ => (4, 4, 1),
    }
}

/// A floor's line from `from` to `to` in its colour and dash.
fn floor_line<C: Clone>(subject: &str, from: C, to: C) -> DashedPathElement<std::vec::IntoIter<C>, u32> {
    let (dash, gap, width) = floor_dash(subject);
    let style = ShapeStyle::from(&color_of(subject)).stroke_width(width);
    DashedPathElement::new(vec![from, to], dash, gap, style)
}

/// A tick of the log axis in decisions per second: `500k`, `2M`, `150M`, `1.5G`.
///
/// ```
/// use kova_bench::chart::tick_label;
/// assert_eq!(tick_label(2e6), "2M");
/// assert_eq!(tick_label(150e6), "150M");
/// assert_eq!(tick_label(1.5e9), "1.5G");
/// assert_eq!(tick_label(500e3), "500k");
/// ```
pub fn tick_label(value: f64) -> String {
    let (scaled, suffix) = match value.abs() {
        v if v >= 1e9 => (value / 1e9, "G"),
        v if v >= 1e6 => (value / 1e6, "M"),
        v if v >= 1e3 => (value / 1e3, "k"),
        _ => (value, ""),
    };
    let text = format!("{scaled:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text);
    format!("{text}{suffix}")
}

/// Ticks at 1, 2 and 5 of every decade within `lo..=hi`.
///
/// ```
/// assert_eq!(kova_bench::chart::log_ticks(3e6, 60e6), [5e6, 10e6, 20e6, 50e6]);
/// ```
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo) {
        return Vec::new();
    }
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    (first..=last)
        .flat_map(|e| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(e)))
        .filter(|v| (lo..=hi).contains(v))
        .collect()
}

/// The label under a group of bars.
fn threads_label(threads: usize) -> String {
    if threads == 1 {
        "1 thread".to_owned()
    } else {
        format!("{threads} threads")
    }
}

/// Renders the chart as an SVG document.
pub fn render_svg(report: &Report) -> Result<String, Box<dyn std::error::Error>> {
    let panels = report.scenarios.len().max(1);
    let cols = 2;
    let rows = panels.div_ceil(cols);
    let (w, h) = (1400u32, 360 * rows as u32 + 70);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        root.fill(&WHITE)?;
        let (top, body) = root.split_vertically(70);
        let title = format!(
            "kova-bench: decisions/s (log scale) per scenario and thread count. {}, {} cores, {}, {} run",
            report.machine.cpu, report.machine.cores, report.machine.date, report.settings.mode
        );
        top.draw(&Text::new(title, (20, 14), ("sans-serif", 20).into_font()))?;
        let note = "Lines across a group's bars: the floors (the least such a check can cost), each in \
                    its own dash (legend). Higher is faster.";
        top.draw(&Text::new(note, (20, 42), ("sans-serif", 14).into_font().color(&RGBColor(80, 80, 80))))?;
        let (grid, legend) = body.split_horizontally(w - 230);
        draw_legend(&legend, report)?;
        for (area, scenario) in grid.split_evenly((rows, cols)).iter().zip(&report.scenarios) {
            let records: Vec<&Record> = report
                .records
                .iter()
                .filter(|r| r.scenario == scenario.name && r.ops_per_sec > 0.0)
                .collect();
            draw_panel(area, &scenario.name, &records, &report.settings.threads)?;
        }
        root.present()?;
    }
    Ok(svg)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    name: &str,
    records: &[&Record],
    threads: &[usize],
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let groups: Vec<usize> =
        threads.iter().copied().filter(|t| records.iter().any(|r| r.threads == *t)).collect();
    if groups.is_empty() {
        return Ok(());
    }
    let bars: Vec<&str> = SUBJECT_ORDER
        .iter()
        .copied()
        .filter(|s| records.iter().any(|r| r.subject == *s && r.kind != SubjectKind::Floor))
        .collect();
    let values = records.iter().map(|r| r.ops_per_sec);
    let y_max = values.clone().fold(0.0, f64::max) * 1.8;
    // A decade under the slowest bar at least, so that the shortest bar is still visible.
    let y_min = (values.fold(f64::INFINITY, f64::min) / 3.0).min(y_max / 20.0);
    let n = groups.len() as f64;
    // Ticks at 1, 2 and 5 of each decade; thread labels at the groups' centres (the half-unit
    // key points: plotters places f64 labels itself, so the others are left blank).
    let mut chart = ChartBuilder::on(area)
        .caption(name, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(28)
        .y_label_area_size(62)
        .build_cartesian_2d(0.0..n, (y_min..y_max).log_scale().with_key_points(log_ticks(y_min, y_max)))?;
    let label_of = |x: &f64| {
        let g = x.floor();
        let centre = (x - g - 0.5).abs() < 1e-6;
        match groups.get(g as usize) {
            Some(&t) if centre => threads_label(t),
            _ => String::new(),
        }
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&label_of)
        .y_label_formatter(&|y| tick_label(*y))
        .y_desc("decisions/s")
        .label_style(("sans-serif", 13))
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()?;
    let slot = 0.84 / bars.len().max(1) as f64;
    for (g, &t) in groups.iter().enumerate() {
        let left = g as f64 + 0.08;
        for (i, subject) in bars.iter().enumerate() {
            let Some(r) = records.iter().find(|r| r.subject == *subject && r.threads == t) else { continue };
            let x0 = left + i as f64 * slot;
            let style = color_of(subject).filled();
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x0 + slot * 0.08, y_min), (x0 + slot * 0.92, r.ops_per_sec)],
                style,
            )))?;
        }
        for floor in records.iter().filter(|r| r.kind == SubjectKind::Floor && r.threads == t) {
            let (from, to) = ((left - 0.03, floor.ops_per_sec), (left + 0.84 + 0.03, floor.ops_per_sec));
            chart.draw_series(std::iter::once(floor_line(&floor.subject, from, to)))?;
        }
    }
    Ok(())
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    report: &Report,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let present = |kind: SubjectKind| -> Vec<&str> {
        SUBJECT_ORDER
            .iter()
            .copied()
            .filter(|s| report.records.iter().any(|r| r.subject == *s && r.kind == kind))
            .collect()
    };
    let mut y = 30;
    for (heading, kind) in
        [("kova", SubjectKind::Kova), ("peers", SubjectKind::Peer), ("floors", SubjectKind::Floor)]
    {
        let subjects = present(kind);
        if subjects.is_empty() {
            continue;
        }
        area.draw(&Text::new(heading, (10, y), ("sans-serif", 15).into_font().style(FontStyle::Bold)))?;
        y += 24;
        for subject in subjects {
            let color = color_of(subject);
            if kind == SubjectKind::Floor {
                area.draw(&floor_line(subject, (12, y + 7), (40, y + 7)))?;
            } else {
                area.draw(&Rectangle::new([(12, y), (40, y + 14)], color.filled()))?;
            }
            let label = match subject {
                "floor_cas" => "bare CAS loop",
                "floor_read" => "bare random read",
                crate::subject::LOAD_FLOOR => "bare load and clock read",
                PINNED_FLOOR => "CAS behind kova's pin",
                other => other,
            };
            area.draw(&Text::new(label.to_owned(), (48, y), ("sans-serif", 14)))?;
            y += 22;
        }
        y += 12;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::*;

    #[test]
    fn ticks_read_as_rates() {
        assert_eq!(tick_label(1e6), "1M");
        assert_eq!(tick_label(20e6), "20M");
        assert_eq!(tick_label(2.5e6), "2.5M");
        assert_eq!(tick_label(3e9), "3G");
        assert_eq!(tick_label(900.0), "900");
    }

    #[test]
    fn kova_is_blue_and_every_peer_has_its_own_colour() {
        let kova: Vec<RGBColor> = kova::AlgorithmKind::ALL.iter().map(|k| color_of(k.as_str())).collect();
        assert!(kova.iter().all(|c| c.2 > c.0 && c.2 > c.1), "{kova:?}");
        let peers = [
            "governor",
            crate::governor_tuned::GOVERNOR_TUNED,
            "mutex_bucket",
            "ratelimit",
            "ratelimit_std",
            "leaky_bucket",
            crate::report::PINGORA,
        ];
        let mut colours: Vec<RGBColor> = peers.iter().map(|p| color_of(p)).chain(kova).collect();
        let n = colours.len();
        colours.sort_by_key(|c| (c.0, c.1, c.2));
        colours.dedup();
        assert_eq!(colours.len(), n);
    }

    #[test]
    fn the_svg_has_a_bar_per_subject_and_thread_count_and_floors_as_lines() {
        let r = report(vec![
            record("gcra", SubjectKind::Kova, "direct", 1, 100e6),
            record("gcra", SubjectKind::Kova, "direct", 2, 40e6),
            record("governor", SubjectKind::Peer, "direct", 1, 50e6),
            record("governor", SubjectKind::Peer, "direct", 2, 20e6),
            record("floor_cas", SubjectKind::Floor, "direct", 1, 150e6),
            record("floor_cas", SubjectKind::Floor, "direct", 2, 30e6),
        ]);
        let svg = render_svg(&r).unwrap();
        let fill = |c: RGBColor| format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
        // Two bars each plus one legend swatch.
        assert_eq!(svg.matches(&fill(color_of("gcra"))).count(), 3, "{svg}");
        assert_eq!(svg.matches(&fill(color_of("governor"))).count(), 3);
        // The floor is no bar.
        assert_eq!(svg.matches(&fill(color_of("floor_cas"))).count(), 0);
        assert!(svg.contains("1 thread") && svg.contains("2 threads"));
    }

    #[test]
    fn each_floor_has_its_own_dash_and_the_legend_names_both_of_a_panel() {
        let floors = ["floor_cas", "floor_read", PINNED_FLOOR];
        let mut dashes: Vec<(u32, u32, u32)> = floors.iter().map(|f| floor_dash(f)).collect();
        dashes.dedup();
        assert_eq!(dashes.len(), floors.len(), "{dashes:?}");
        let r = report(vec![
            record("gcra", SubjectKind::Kova, "direct", 1, 100e6),
            record("floor_read", SubjectKind::Floor, "direct", 1, 150e6),
            record(PINNED_FLOOR, SubjectKind::Floor, "direct", 1, 90e6),
        ]);
        let svg = render_svg(&r).unwrap();
        assert!(svg.contains("bare random read") && svg.contains("CAS behind kova&apos;s pin"), "{svg}");
        // The pinned floor's dots are drawn 3 px wide, the random read's dashes 2 px.
        assert!(svg.contains("stroke-width=\"3\"") && svg.contains("stroke-width=\"2\""), "{svg}");
    }

    #[test]
    fn every_measured_thread_count_gets_its_group_label() {
        let counts = [1, 2, 4, 8, 16];
        let records =
            counts.iter().map(|&t| record("gcra", SubjectKind::Kova, "direct", t, 10e6 * t as f64)).collect();
        let mut r = report(records);
        r.settings.threads = counts.to_vec();
        let svg = render_svg(&r).unwrap();
        for t in &counts[1..] {
            assert_eq!(svg.matches(&format!("\n{t} threads\n")).count(), 1, "{t}: {svg}");
        }
        assert_eq!(svg.matches("\n1 thread\n").count(), 1);
    }
}
