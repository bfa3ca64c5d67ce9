//! What the help shows that other definitions decide: the registries' lists (workloads,
//! models, studies, formats) and each command's default repeat counts, filled into the flags'
//! help texts, and `concur list`. A new workload, model, study or format cannot be missing.

use clap::CommandFactory;

use super::Cli;
use crate::plan::presets;

/// `concur list`: every workload, model, study and output format, with one line each.
pub(super) fn list() {
    println!("Workloads (--workload SPEC):");
    for e in crate::workload::REGISTRY {
        println!("  {:28} {}", e.usage, e.help);
    }
    println!("\nModels (--model SPEC; W defaults to the core count):");
    for e in crate::model::REGISTRY {
        println!("  {:28} {}", e.usage(), e.help);
    }
    println!("\nStudies (concur run STUDY):");
    for s in presets::STUDIES {
        println!("  {:28} {}", s.name, s.help);
    }
    println!("\nOutput formats (--format FORMAT, --export FORMAT=FILE):");
    for f in crate::report::FORMATS {
        println!("  {:28} {}", f.name, f.help);
    }
}

/// Each study's counted runs per cell when `-r` is not given, from the studies themselves:
/// `gil 5 (--quick 3), …, free-form 5`.
fn default_repeats() -> String {
    let defaults = crate::plan::options::StudyOptions::default();
    let mut parts: Vec<String> = presets::STUDIES
        .iter()
        .filter_map(|s| {
            let name = s.name;
            let full = presets::preset(name, &defaults, false).ok()?.repeat;
            let quick = presets::preset(
                name,
                &crate::plan::options::StudyOptions {
                    quick: true,
                    ..defaults.clone()
                },
                false,
            )
            .ok()?
            .repeat;
            Some(if quick == full {
                format!("{full} for {name}")
            } else {
                format!("{full} for {name} ({quick} with --quick)")
            })
        })
        .collect();
    parts.push(format!(
        "{} for a free-form study",
        crate::plan::FREEFORM_REPEAT
    ));
    parts.join(", ")
}

/// The command line's definition, with the lists in its help made from the registries.
pub(crate) fn command() -> clap::Command {
    let workloads = crate::workload::REGISTRY
        .iter()
        .map(|e| e.usage)
        .collect::<Vec<_>>()
        .join(", ");
    let models = crate::model::REGISTRY
        .iter()
        .map(|e| e.usage())
        .collect::<Vec<_>>()
        .join(", ");
    let studies = presets::study_names().join(", ");
    let formats = crate::report::format_names().join(", ");
    let stdout_formats = crate::report::stdout_format_names().join(", ");
    // `-r`'s defaults: each study's for `run`, the command's own for the others.
    let study_repeats = default_repeats();
    let repeats_of = |command: &str| match command {
        "crawl" => super::CRAWL_REPEAT.to_string(),
        "advise" => crate::study::conduct::ADVISE_REPEAT.to_string(),
        _ => study_repeats.clone(),
    };
    let fill = |a: clap::Arg, repeats: &str| -> clap::Arg {
        let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        if !help.contains(char::is_uppercase) {
            return a;
        }
        let filled = help
            .replace("(WORKLOADS)", &format!("({workloads})"))
            .replace("(MODELS)", &format!("({models})"))
            .replace("(STUDIES)", &format!("(default tour; {studies})"))
            .replace("(FORMATS)", &format!("({formats})"))
            .replace("(STDOUT_FORMATS)", &format!("({stdout_formats})"))
            .replace("REPEATS", repeats);
        if filled == help {
            a
        } else {
            a.help(filled)
        }
    };
    let fill_all = |c: clap::Command| -> clap::Command {
        let repeats = repeats_of(c.get_name());
        let ids: Vec<String> = c.get_arguments().map(|a| a.get_id().to_string()).collect();
        ids.iter()
            .fold(c, |c, id| c.mut_arg(id, |a| fill(a, &repeats)))
    };
    let mut cmd = Cli::command();
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for n in names {
        cmd = cmd.mut_subcommand(n, fill_all);
    }
    cmd
}
