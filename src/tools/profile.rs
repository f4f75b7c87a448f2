//! Tool profiles: which tool surface a session speaks. A profile is a default tool list plus the
//! texts (descriptions, parameter schemas) of its tools; both profiles run on the same session,
//! command and subagent actors. `penguin` (the default) is PenguinHarness's surface,
//! `openvaala` is OpenVaala's file and command tools (`docs/tools-openvaala.md`).
//!
//! This is the one table of each profile's tools: [`ToolProfile::default_tools`] and
//! [`COLLABORATION_TOOLS`] (OpenVaala's collaboration tools, always present in the openvaala
//! profile, bound to [`ServiceKind::Subagents`]). [`assemble`] turns a profile, a config's `tools.builtin` and
//! the caller's extra implementations into a registry; the openvaala command tools are bound to
//! [`ServiceKind::DetachedCommands`], served by the session's command supervisor. It starts
//! nothing and knows no actor.
//!
//! Each profile's tools (definitions and code, or a pointer to the actor that serves them) are
//! in its folder: [`penguin`] and [`openvaala`].

pub mod openvaala;
pub mod penguin;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use super::registry::{BuiltinEntry, ToolDefinitionConfig, ToolListError, ToolRegistry};
use super::{ServiceKind, Tool};
pub use openvaala::{WAIT_DEFAULT_S, WAIT_MAX_S, collaboration_definition, openvaala_definition};

/// The tool surface of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ToolProfile {
    /// PenguinHarness's tools (`docs/tools.md`).
    #[default]
    Penguin,
    /// OpenVaala's file and command tools (`docs/tools-openvaala.md`).
    OpenVaala,
}

/// A profile name this build does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tool profile \"{0}\" (known profiles: penguin, openvaala)")]
pub struct UnknownProfile(pub String);

/// Why a tool list does not fit its profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    /// The profile's name is unknown.
    #[error(transparent)]
    UnknownProfile(#[from] UnknownProfile),
    /// A `tools.builtin` name the profile does not have.
    #[error(
        "unknown tool \"{name}\" in tools.builtin of the {profile} profile (known tools: {known})"
    )]
    UnknownTool {
        /// The name given.
        name: String,
        /// The profile.
        profile: ToolProfile,
        /// The profile's tools, listed.
        known: String,
    },
    /// A collaboration tool listed in `tools.builtin` of the openvaala profile (its name).
    #[error(
        "tool \"{0}\" cannot be listed in tools.builtin: collaboration tools are always present in the openvaala profile"
    )]
    CollaborationTool(String),
    /// A `tools.builtin` name that is unknown or not available in this build.
    #[error(transparent)]
    List(#[from] ToolListError),
}

/// The openvaala profile's file and command tools, in the order the model sees them: its
/// default list, and everything its `tools.builtin` may name.
pub const OPENVAALA_TOOLS: [&str; 7] = [
    "read_file",
    "apply_patch",
    "bash",
    "read_command_output",
    "write_stdin",
    "stop_command",
    "list_commands",
];

/// OpenVaala's collaboration tools: appended to every openvaala registry, bound to the
/// session's subagent supervisor ([`ServiceKind::Subagents`]); never named in `tools.builtin`.
pub const COLLABORATION_TOOLS: [&str; 6] = [
    "spawn_agent",
    "send_message",
    "wait_agent",
    "interrupt_agent",
    "list_agents",
    "read_session_history",
];

/// The openvaala command tools: bound to the session's command supervisor.
pub const OPENVAALA_COMMAND_TOOLS: [&str; 5] = [
    "bash",
    "read_command_output",
    "write_stdin",
    "stop_command",
    "list_commands",
];

impl ToolProfile {
    /// The name as written in configs, flags and `session_meta`.
    pub fn name(self) -> &'static str {
        match self {
            ToolProfile::Penguin => "penguin",
            ToolProfile::OpenVaala => "openvaala",
        }
    }

    /// The profile's default tool list (before the model's image tool for penguin, and the
    /// collaboration tools for openvaala).
    pub fn default_tools(self) -> &'static [&'static str] {
        match self {
            ToolProfile::Penguin => &penguin::BUILTIN_NAMES,
            ToolProfile::OpenVaala => &OPENVAALA_TOOLS,
        }
    }
}

impl fmt::Display for ToolProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ToolProfile {
    type Err = UnknownProfile;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "penguin" => Ok(ToolProfile::Penguin),
            "openvaala" => Ok(ToolProfile::OpenVaala),
            other => Err(UnknownProfile(other.to_string())),
        }
    }
}

/// Options of the openvaala profile's local tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalToolOptions {
    /// The model takes images (else read_file answers images with a placeholder text).
    pub vision: bool,
    /// `tools.max_image_kb`: images over this size are re-encoded as JPEG and scaled down.
    pub max_image_kb: u64,
}

impl Default for LocalToolOptions {
    fn default() -> Self {
        LocalToolOptions {
            vision: false,
            max_image_kb: openvaala::read_file::DEFAULT_MAX_IMAGE_KB,
        }
    }
}

/// The implementation of an openvaala file tool (the command tools are service-bound).
fn openvaala_local(name: &str, opts: LocalToolOptions) -> Option<Arc<dyn Tool>> {
    let tool: Arc<dyn Tool> = match name {
        "read_file" => Arc::new(openvaala::read_file::VaalaReadFile::new(
            opts.vision,
            opts.max_image_kb,
        )),
        "apply_patch" => Arc::new(penguin::apply_patch::ApplyPatch),
        _ => return None,
    };
    Some(tool)
}

/// The tools of a session of `profile`: the profile's default list (`entries: None`) or a
/// config's `tools.builtin`, with implementations from this module or from `bound`
/// (service-bound tools and, for penguin, the model's image tool). An unknown name, or in the
/// openvaala profile a collaboration tool or a PenguinHarness tool, is an error naming it.
pub fn assemble(
    profile: ToolProfile,
    entries: Option<&[BuiltinEntry]>,
    bound: Vec<(ToolDefinitionConfig, Arc<dyn Tool>)>,
    opts: LocalToolOptions,
) -> Result<ToolRegistry, ProfileError> {
    if profile == ToolProfile::Penguin {
        return Ok(penguin::assemble(entries, bound)?);
    }
    let names: Vec<(&str, Option<&super::registry::ToolOverride>)> = match entries {
        None => OPENVAALA_TOOLS.iter().map(|n| (*n, None)).collect(),
        Some(list) => list
            .iter()
            .map(|e| match e {
                BuiltinEntry::Name(n) => (n.as_str(), None),
                BuiltinEntry::Override(o) => (o.name.as_str(), Some(o)),
            })
            .collect(),
    };
    let mut reg = ToolRegistry::empty();
    for (name, ov) in names {
        if COLLABORATION_TOOLS.contains(&name) {
            return Err(ProfileError::CollaborationTool(name.to_string()));
        }
        let Some(mut def) = openvaala_definition(name) else {
            return Err(ProfileError::UnknownTool {
                name: name.to_string(),
                profile,
                known: OPENVAALA_TOOLS.join(", "),
            });
        };
        if let Some(o) = ov {
            o.apply(&mut def);
        }
        if OPENVAALA_COMMAND_TOOLS.contains(&name) {
            reg.register_service(def, ServiceKind::DetachedCommands);
            continue;
        }
        let tool = openvaala_local(name, opts)
            .or_else(|| {
                bound
                    .iter()
                    .find(|(d, _)| d.name == name)
                    .map(|(_, t)| t.clone())
            })
            .ok_or_else(|| ToolListError::UnavailableTool(name.to_string()))?;
        reg.register(def, tool);
    }
    for name in COLLABORATION_TOOLS {
        if let Some(def) = collaboration_definition(name) {
            reg.register_service(def, ServiceKind::Subagents);
        }
    }
    Ok(reg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(r: &ToolRegistry) -> Vec<String> {
        r.names()
    }

    #[test]
    fn profile_names_round_trip_and_unknown_is_named() {
        for p in [ToolProfile::Penguin, ToolProfile::OpenVaala] {
            assert_eq!(p.name().parse::<ToolProfile>(), Ok(p));
        }
        let e = "vaala".parse::<ToolProfile>().err().map(|e| e.to_string());
        assert_eq!(
            e.as_deref(),
            Some("unknown tool profile \"vaala\" (known profiles: penguin, openvaala)")
        );
        assert_eq!(ToolProfile::default(), ToolProfile::Penguin);
    }

    #[test]
    fn openvaala_default_list_and_its_bindings() {
        let r = assemble(ToolProfile::OpenVaala, None, Vec::new(), Default::default())
            .unwrap_or_default();
        // The default list, then the collaboration tools (always present, served by the
        // session's subagent supervisor).
        let all: Vec<&str> = OPENVAALA_TOOLS
            .iter()
            .chain(&COLLABORATION_TOOLS)
            .copied()
            .collect();
        assert_eq!(names(&r), all);
        assert_eq!(
            r.bound_to(&ServiceKind::DetachedCommands),
            OPENVAALA_COMMAND_TOOLS
        );
        assert_eq!(r.bound_to(&ServiceKind::Subagents), COLLABORATION_TOOLS);
        assert!(!r.uses(&ServiceKind::Commands));
        let only_files = [
            BuiltinEntry::Name("apply_patch".into()),
            BuiltinEntry::Name("read_file".into()),
        ];
        let r = assemble(
            ToolProfile::OpenVaala,
            Some(&only_files),
            Vec::new(),
            Default::default(),
        )
        .unwrap_or_default();
        let mut want = vec!["apply_patch", "read_file"];
        want.extend(COLLABORATION_TOOLS);
        assert_eq!(names(&r), want);
        assert!(!r.uses(&ServiceKind::DetachedCommands));
        let spec = r.get("read_file").map(|t| t.definition.model_spec());
        let required = spec.map(|s| s["parameters"]["required"].clone());
        assert_eq!(required, Some(serde_json::json!(["path"])));
    }

    #[test]
    fn openvaala_builtin_refuses_penguin_and_collaboration_names() {
        for (name, want) in [
            (
                "exec_command",
                "unknown tool \"exec_command\" in tools.builtin of the openvaala profile (known tools: read_file, apply_patch, bash, read_command_output, write_stdin, stop_command, list_commands)",
            ),
            (
                "spawn_agent",
                "tool \"spawn_agent\" cannot be listed in tools.builtin: collaboration tools are always present in the openvaala profile",
            ),
        ] {
            let e = assemble(
                ToolProfile::OpenVaala,
                Some(&[BuiltinEntry::Name(name.into())]),
                Vec::new(),
                Default::default(),
            )
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
            assert_eq!(e, want);
        }
    }
}
