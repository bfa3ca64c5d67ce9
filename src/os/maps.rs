//! The kernel's limit on a process's memory mappings (`vm.max_map_count`), which stackful
//! coroutines and fibers meet first: each stack is a mapping with a guard page below it, two
//! mappings, so about 32,000 of them fill the default 65,530.

/// `vm.max_map_count`, when it can be read.
pub(crate) fn max_map_count() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// The memory mappings this process has now, when they can be read.
pub(crate) fn mappings_in_use() -> Option<usize> {
    std::fs::read_to_string("/proc/self/maps")
        .ok()
        .map(|m| m.lines().count())
}
