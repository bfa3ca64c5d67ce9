//! `concur agent` and `concur agents`: a host joining a hub, and the hub's agents listed or
//! told to leave.

use clap::Args;

use crate::base::error::Error;
use crate::cli::agent::hub_url;
use crate::hub::{self, agent, clock};
use crate::os::terminal::{escape_controls, escape_json_controls, Escaped};

/// `concur agents`.
#[derive(Args)]
pub(super) struct AgentsArgs {
    #[command(flatten)]
    hub: crate::plan::options::HubArg,
    /// Tell the agent NAME to leave after the work it holds ('all': every agent)
    #[arg(long, value_name = "NAME|all")]
    stop: Option<String>,
    /// What stdout shows: table or json (one object per agent, one per line)
    #[arg(long, value_name = "FORMAT", default_value = "table")]
    format: String,
}

/// Runs `concur agents`.
pub(super) fn agents(a: AgentsArgs) -> Result<i32, Error> {
    if !["table", "json"].contains(&a.format.as_str()) {
        return Err(Error::flag(
            "--format",
            format!(
                "--format '{}': not a format of concur agents (allowed: table, json)",
                a.format
            ),
        ));
    }
    let hub_arg = a.hub.from_env();
    let files = hub::KeyFiles {
        signing_key: hub_arg.signing_key.clone(),
        listed: None,
    };
    let trust = hub::Trust::load(hub::Role::Study, &files)?;
    let url = hub_url(hub_arg)?;
    let hub = hub::Hub::open_with(&url, trust)?;
    let mut c = hub.connect()?;
    if let Some(name) = a.stop {
        let which = (name != "all").then_some(name.as_str());
        let told = agent::stop(&hub, &mut c, which)?;
        println!("told to leave: {}", Escaped(&told.join(", ")));
        return Ok(0);
    }
    let list = hub.agents(&mut c)?;
    let now = clock::hub_now_ns(&mut c).unwrap_or(0);
    if a.format == "json" {
        for info in &list {
            let mut info = info.clone();
            info.doing = info.doing_now().to_string();
            let text = serde_json::to_string(&info).map_err(|e| Error::Internal(e.to_string()))?;
            println!("{}", escape_json_controls(&text));
        }
        return Ok(0);
    }
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_header(vec![
            "agent",
            "host",
            "address",
            "cores",
            "memory",
            "concur",
            "clock vs hub",
            "beat",
            "doing",
        ]);
    // Every text of a heartbeat is the agent's own word: shown with its controls escaped,
    // so that one cannot clear the screen or retitle the terminal.
    let esc = |s: &str| escape_controls(s).into_owned();
    for i in &list {
        table.add_row(vec![
            esc(&i.name),
            esc(&i.host),
            i.addr.as_deref().map_or_else(|| "?".into(), esc),
            i.cores.to_string(),
            i.mem_total_kib
                .map_or("?".into(), |k| format!("{:.1} GiB", k as f64 / 1048576.0)),
            esc(&i.version),
            clock::describe(&i.clock()),
            format!(
                "{:.1} s ago",
                now.saturating_sub(i.beat_hub_ns) as f64 / 1e9
            ),
            esc(i.doing_now()),
        ]);
    }
    println!("{table}");
    println!(
        "{} agent{} alive on {}",
        list.len(),
        if list.len() == 1 { "" } else { "s" },
        hub.url()
    );
    Ok(0)
}
