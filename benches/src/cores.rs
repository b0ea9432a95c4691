//! Whether the measuring threads ran on separate physical cores: what the CPU topology says
//! (sysfs, as `lscpu` reads it) and what the floors measured, so that no reader takes a
//! 2-thread figure on one core's hyperthreads, or on CPUs taken in turns, for scaling.

use serde::{Deserialize, Serialize};

/// The CPUs this process may run on, as sysfs describes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Logical CPUs allowed to this process.
    pub logical: usize,
    /// Distinct physical cores (package, core id) among them.
    pub physical_cores: usize,
    /// Whether two of the allowed CPUs are hyperthreads of one core (`thread_siblings_list`).
    pub shares_cores: bool,
}

impl Topology {
    /// Reads `/proc/self/status` (`Cpus_allowed_list`) and each allowed CPU's
    /// `/sys/devices/system/cpu/cpuN/topology`; `None` where they cannot be read.
    pub fn detect() -> Option<Topology> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let allowed = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
        let cpus = parse_cpu_list(allowed.trim())?;
        let read = |cpu: usize, file: &str| {
            std::fs::read_to_string(format!("/sys/devices/system/cpu/cpu{cpu}/topology/{file}"))
                .ok()
                .map(|s| s.trim().to_owned())
        };
        let cores = cpus
            .iter()
            .map(|&cpu| Some((read(cpu, "physical_package_id")?, read(cpu, "core_id")?, cpu)))
            .collect::<Option<Vec<_>>>()?;
        let siblings = cpus
            .iter()
            .map(|&cpu| parse_cpu_list(&read(cpu, "thread_siblings_list")?))
            .collect::<Option<Vec<_>>>()?;
        Some(Topology::from_parts(&cpus, &cores, &siblings))
    }

    /// The topology of `cpus` given each one's (package, core id) and sibling list.
    pub fn from_parts(
        cpus: &[usize],
        cores: &[(String, String, usize)],
        siblings: &[Vec<usize>],
    ) -> Topology {
        let mut distinct: Vec<(&str, &str)> =
            cores.iter().map(|(p, c, _)| (p.as_str(), c.as_str())).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let shares_cores = siblings.iter().any(|s| s.iter().filter(|c| cpus.contains(c)).count() > 1);
        Topology { logical: cpus.len(), physical_cores: distinct.len(), shares_cores }
    }
}

/// Parses a kernel CPU list (`0-3,8,10-11`).
///
/// ```
/// assert_eq!(kova_bench::cores::parse_cpu_list("0-2,5"), Some(vec![0, 1, 2, 5]));
/// assert_eq!(kova_bench::cores::parse_cpu_list("x"), None);
/// ```
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

/// What the threads of the multi-thread rows ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadPlacement {
    /// Separate physical cores: the topology has a core per thread, and one shared word costs
    /// the threads what cross-core traffic costs.
    SeparateCores,
    /// One core's hyperthreads (or vCPUs that behave as such): one shared word costs nothing
    /// extra, so contention across cores is not measured.
    SharedCore,
    /// The threads took turns on the CPUs (a CAS loop on one word per thread did not scale):
    /// the machine was busy.
    TookTurns,
    /// One shared word ran faster on more threads than on one, which no placement explains: the
    /// one-thread round was disturbed by other load, and the floors cannot tell.
    Disturbed,
    /// The floors needed were not measured.
    Unknown,
}

impl ThreadPlacement {
    /// Judges from the topology and the CAS floor's aggregate from 1 to `threads` threads, on one
    /// word per thread (`parallel`) and on one shared word (`shared`).
    pub fn judge(
        topology: Option<&Topology>,
        threads: usize,
        parallel: Option<f64>,
        shared: Option<f64>,
    ) -> ThreadPlacement {
        let (Some(parallel), Some(shared)) = (parallel, shared) else { return ThreadPlacement::Unknown };
        if parallel < 0.6 * threads as f64 {
            return ThreadPlacement::TookTurns;
        }
        // Hyperthreads of one core keep a shared line at about one thread's rate; well above it,
        // the one-thread figure is the odd one.
        if shared > 1.25 {
            return ThreadPlacement::Disturbed;
        }
        let enough_cores = topology.is_none_or(|t| t.physical_cores >= threads);
        // On separate cores a contended line moves between caches on every CAS: the aggregate
        // falls well under one thread's. On one core's two hyperthreads it stays in one cache.
        if enough_cores && shared < 0.8 {
            ThreadPlacement::SeparateCores
        } else {
            ThreadPlacement::SharedCore
        }
    }

    /// A sentence for the report's header.
    pub fn sentence(self, topology: Option<&Topology>, threads: usize, shared: Option<f64>) -> String {
        let topo = topology.map_or("The CPU topology could not be read".to_owned(), |t| {
            format!(
                "The topology gives this process {} logical CPUs on {} physical cores{}",
                t.logical,
                t.physical_cores,
                if t.shares_cores { " (some are hyperthreads of one core)" } else { "" }
            )
        });
        let cas = shared.map_or(String::new(), |s| {
            format!(
                "; the CAS loop on one shared word ran {s:.2}x its 1-thread aggregate at {threads} threads"
            )
        });
        let verdict = match self {
            ThreadPlacement::SeparateCores => {
                "the threads ran on separate physical cores, and the multi-thread rows measure contention \
                 across cores"
            }
            ThreadPlacement::SharedCore => {
                "the threads did NOT run on separate physical cores (a shared word cost them nothing \
                 extra, or there are fewer cores than threads): the multi-thread rows do not measure \
                 contention across cores, nor scaling"
            }
            ThreadPlacement::TookTurns => {
                "the threads took turns on the CPUs (a CAS loop on one word per thread did not scale): \
                 the multi-thread rows say little"
            }
            ThreadPlacement::Disturbed => {
                "the floors cannot tell whether the threads ran on separate cores (one shared word ran \
                 faster on more threads than on one: the machine was busy during the one-thread round)"
            }
            ThreadPlacement::Unknown => "whether the threads ran on separate cores was not measured",
        };
        format!("Threads: {verdict}. {topo}{cas}.")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(cpus: &[usize], core_ids: &[&str], siblings: &[&str]) -> Topology {
        let cores: Vec<_> =
            cpus.iter().zip(core_ids).map(|(&c, id)| ("0".into(), id.to_string(), c)).collect();
        let siblings: Vec<_> = siblings.iter().map(|s| parse_cpu_list(s).unwrap()).collect();
        Topology::from_parts(cpus, &cores, &siblings)
    }

    #[test]
    fn topology_counts_physical_cores_and_siblings() {
        // Two separate cores.
        let t = parts(&[0, 1], &["0", "1"], &["0", "1"]);
        assert_eq!((t.logical, t.physical_cores, t.shares_cores), (2, 2, false));
        // One core's two hyperthreads.
        let t = parts(&[0, 1], &["0", "0"], &["0-1", "0-1"]);
        assert_eq!((t.physical_cores, t.shares_cores), (1, true));
        // Siblings outside the allowed set do not count.
        let t = parts(&[0, 2], &["0", "1"], &["0,4", "2,6"]);
        assert_eq!((t.physical_cores, t.shares_cores), (2, false));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("3"), Some(vec![3]));
        assert_eq!(parse_cpu_list("0-1, 4-5"), Some(vec![0, 1, 4, 5]));
        assert_eq!(parse_cpu_list("5-2"), None);
        assert_eq!(parse_cpu_list(""), None);
    }

    #[test]
    fn placement_from_topology_and_floors() {
        let two = Topology { logical: 2, physical_cores: 2, shares_cores: false };
        let one = Topology { logical: 2, physical_cores: 1, shares_cores: true };
        let judge = |t, p, s| ThreadPlacement::judge(t, 2, p, s);
        // The dev VM: two separate cores, the shared word falls to 0.2x.
        assert_eq!(judge(Some(&two), Some(1.9), Some(0.21)), ThreadPlacement::SeparateCores);
        // The AMD VM: two "cores" whose shared word costs nothing extra.
        assert_eq!(judge(Some(&two), Some(1.9), Some(0.98)), ThreadPlacement::SharedCore);
        // Hyperthreads by the topology, whatever the floor says.
        assert_eq!(judge(Some(&one), Some(1.9), Some(0.3)), ThreadPlacement::SharedCore);
        // Busy machine: per-thread words did not scale.
        assert_eq!(judge(Some(&two), Some(1.0), Some(0.2)), ThreadPlacement::TookTurns);
        assert_eq!(judge(Some(&two), None, Some(0.2)), ThreadPlacement::Unknown);
        // A shared word faster on two threads than on one: the one-thread round was disturbed.
        assert_eq!(judge(Some(&two), Some(1.9), Some(2.86)), ThreadPlacement::Disturbed);
        let text = ThreadPlacement::SharedCore.sentence(Some(&one), 2, Some(0.98));
        assert!(text.contains("did NOT run on separate physical cores") && text.contains("0.98x"), "{text}");
    }
}
