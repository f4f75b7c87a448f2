//! Config discovery through the real binary: the user file (under `$XDG_CONFIG_HOME`, else
//! `$HOME/.config`), the project file (the workspace's `.rookery/config.yaml`, or a parent's up
//! to the repository root and never above it), the `ROOKERY_*` environment over the files, the
//! flags over the environment, `--config FILE` in the project file's place, the escape
//! (`--no-config-discovery`, `ROOKERY_NO_CONFIG`), what a project file may not set, malformed
//! files (exit 2 naming the file and the line), and `config show` (each value's layer, secrets
//! masked). One test runs a real session against an OpenAI-compatible mock on 127.0.0.1.

use crate::common::cli as support;
use crate::common::openai_mock::{Mock, Reply, split};

use std::path::{Path, PathBuf};

use support::*;

const TEXT_ANSWER: &str = concat!(
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"configured\"},\"finish_reason\":null}]}\n\n",
    "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

/// Writes `text` to `path`, creating its folders.
fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write config");
    path.to_path_buf()
}

/// The user file under the sandbox's `$HOME`.
fn user_file(sb: &Sandbox) -> PathBuf {
    sb.path("user-home").join(".config/rookery/config.yaml")
}

/// `rookery config show --home H <args>` with extra variables; waits for its end.
fn show(sb: &Sandbox, args: &[&str], envs: &[(&str, &str)]) -> Out {
    let mut c = sb.command();
    c.args(["config", "show", "--home"])
        .arg(sb.home())
        .args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    Running::spawn(c).wait(RUN_TIMEOUT)
}

/// The line of `key` (`  max_turns`, indentation included) in `config show`'s output.
fn line<'a>(out: &'a Out, key: &str) -> &'a str {
    out.stdout
        .lines()
        .find(|l| l.starts_with(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no {key:?} line in:\n{}", out.stdout))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_and_project_files_and_the_environment_reach_the_model() {
    let mock = Mock::start(vec![Reply::Sse(split(TEXT_ANSWER, 30))], None).await;
    let sb = Sandbox::new();
    write(
        &user_file(&sb),
        &format!(
            "system_prompt: from the user file\nmodel:\n  provider: openai\n  base_url: {}\n  model: gpt-user\n  api_key_env: ROOKERY_TEST_UNSET_CONFIG_KEY\n",
            mock.base_url
        ),
    );
    write(
        &sb.ws().join(".rookery/config.yaml"),
        "system_prompt: from the project file\nmodel:\n  temperature: 0.5\n",
    );
    let mut c = sb.run_command(&["say something"]);
    c.env("ROOKERY_MODEL", "gpt-from-env");
    let out = tokio::task::spawn_blocking(move || Running::spawn(c).wait(RUN_TIMEOUT))
        .await
        .expect("join");
    out.expect_code(0);
    assert!(out.stdout.contains("configured"), "{}", out.stdout);
    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let body = &requests[0];
    assert_eq!(body["model"], "gpt-from-env", "{body}");
    assert_eq!(body["temperature"], 0.5, "{body}");
    assert_eq!(body["messages"][0]["role"], "system", "{body}");
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(system.contains("from the project file"), "{body}");
    assert!(!system.contains("from the user file"), "{body}");
    mock.assert_clean();
}

#[test]
fn the_user_file_is_read_under_xdg_config_home_else_home() {
    let sb = Sandbox::new();
    let home_file = write(&user_file(&sb), "max_turns: 5\n");
    let out = show(&sb, &[], &[]);
    out.expect_code(0);
    assert_eq!(
        line(&out, "max_turns"),
        format!("max_turns: 5  # user {}", home_file.display())
    );
    let xdg = sb.path("xdg");
    let xdg_file = write(&xdg.join("rookery/config.yaml"), "max_turns: 7\n");
    let out = show(&sb, &[], &[("XDG_CONFIG_HOME", s(&xdg))]);
    out.expect_code(0);
    assert_eq!(
        line(&out, "max_turns"),
        format!("max_turns: 7  # user {}", xdg_file.display())
    );
}

#[test]
fn the_project_file_is_searched_up_to_the_repository_root_and_not_above() {
    let sb = Sandbox::new();
    let outer = sb.path("outer");
    let repo = outer.join("repo");
    let ws = repo.join("src/deep");
    std::fs::create_dir_all(&ws).expect("mkdir");
    write(&outer.join(".rookery/config.yaml"), "max_turns: 11\n");
    let in_repo = write(&repo.join(".rookery/config.yaml"), "system_prompt: repo\n");
    // No repository: the workspace only, so neither file.
    let out = show(&sb, &["--workspace", s(&ws)], &[]);
    out.expect_code(0);
    assert!(
        line(&out, "system_prompt").ends_with("# default"),
        "{}",
        out.stdout
    );
    assert_eq!(line(&out, "max_turns"), "max_turns: -1  # default");
    // In a repository: the nearest file up to its root, and nothing above the root.
    std::fs::create_dir(repo.join(".git")).expect("mkdir .git");
    let out = show(&sb, &["--workspace", s(&ws)], &[]);
    out.expect_code(0);
    assert_eq!(
        line(&out, "system_prompt"),
        format!("system_prompt: \"repo\"  # project {}", in_repo.display())
    );
    assert_eq!(line(&out, "max_turns"), "max_turns: -1  # default");
    // The workspace's own file wins over the parent's.
    let own = write(&ws.join(".rookery/config.yaml"), "system_prompt: own\n");
    let out = show(&sb, &["--workspace", s(&ws)], &[]);
    assert_eq!(
        line(&out, "system_prompt"),
        format!("system_prompt: \"own\"  # project {}", own.display())
    );
}

#[test]
fn the_environment_overrides_the_files_and_the_flags_override_the_environment() {
    let sb = Sandbox::new();
    let user = write(
        &user_file(&sb),
        "max_turns: 5\nmodel:\n  provider: openai\n  model: gpt-user\ntools:\n  profile: penguin\n",
    );
    write(
        &sb.ws().join(".rookery/config.yaml"),
        "max_turns: 6\nmodel:\n  model: gpt-project\n",
    );
    let envs = [
        ("ROOKERY_MAX_TURNS", "7"),
        ("ROOKERY_MODEL", "gpt-env"),
        ("ROOKERY_TOOLS_PROFILE", "openvaala"),
        ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
    ];
    let out = show(&sb, &["--max-turns", "8"], &envs);
    out.expect_code(0);
    assert_eq!(line(&out, "max_turns"), "max_turns: 8  # flag --max-turns");
    assert_eq!(
        line(&out, "  profile"),
        "  profile: \"openvaala\"  # env ROOKERY_TOOLS_PROFILE"
    );
    assert_eq!(
        line(&out, "  provider"),
        format!("  provider: \"openai\"  # user {}", user.display())
    );
    assert_eq!(
        line(&out, "  model"),
        "  model: \"gpt-env\"  # env ROOKERY_MODEL"
    );
    assert_eq!(
        line(&out, "  base_url"),
        "  base_url: \"http://127.0.0.1:9/v1\"  # env OPENAI_BASE_URL"
    );
    let out = show(
        &sb,
        &["--model", "gpt-flag", "--base-url", "http://127.0.0.1:8/v1"],
        &envs,
    );
    out.expect_code(0);
    assert_eq!(
        line(&out, "  model"),
        "  model: \"gpt-flag\"  # flag --model"
    );
    assert_eq!(
        line(&out, "  base_url"),
        "  base_url: \"http://127.0.0.1:8/v1\"  # flag --base-url"
    );
    // A value the config cannot take names its variable.
    let out = show(&sb, &[], &[("ROOKERY_SANDBOX", "loose")]);
    out.expect_code(2);
    assert!(
        out.stderr
            .starts_with("rookery: environment variable ROOKERY_SANDBOX: "),
        "{}",
        out.stderr
    );
}

#[test]
fn config_show_names_every_layer_and_masks_secrets() {
    let sb = Sandbox::new();
    let user = write(
        &user_file(&sb),
        "tools:\n  mcpServers:\n    - name: gh\n      config:\n        command: gh-mcp\n        env:\n          GITHUB_TOKEN: ghp_configshowsecret\n          LOG_LEVEL: debug\n",
    );
    let out = show(&sb, &[], &[]);
    out.expect_code(0);
    assert!(!out.stdout.contains("configshowsecret"), "{}", out.stdout);
    let servers = line(&out, "  mcpServers");
    assert!(
        servers.contains("\"GITHUB_TOKEN\":\"********\""),
        "{servers}"
    );
    assert!(servers.contains("\"LOG_LEVEL\":\"debug\""), "{servers}");
    assert!(
        servers.ends_with(&format!("# user {}", user.display())),
        "{servers}"
    );
    assert!(
        out.stdout
            .contains(&format!("#   user {}\n", user.display())),
        "{}",
        out.stdout
    );
    // Every value line names its layer, and the whole text is YAML.
    for l in out.stdout.lines().filter(|l| !l.starts_with('#')) {
        assert!(l.ends_with(':') || l.contains("  # "), "{l}");
    }
    let parsed: serde_yaml::Value = serde_yaml::from_str(&out.stdout).expect("YAML");
    assert_eq!(parsed["tools"]["max_parallel"], serde_yaml::Value::from(16));
}

#[test]
fn a_malformed_file_is_an_error_naming_the_file_and_the_line() {
    let sb = Sandbox::new();
    let user = write(&user_file(&sb), "max_turns: 3\nsystem_prompt: [unclosed\n");
    let out = sb.run(&["--script", "/nonexistent.json", "hi"]);
    out.expect_code(2);
    let first = out.stderr.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("rookery: invalid config {}: ", user.display())),
        "{first}"
    );
    assert!(first.contains("line 2"), "{first}");
    std::fs::remove_file(&user).expect("rm");
    let project = write(
        &sb.ws().join(".rookery/config.yaml"),
        "max_turns: 3\nmax_turn: 4\n",
    );
    let out = show(&sb, &[], &[]);
    out.expect_code(2);
    assert!(
        out.stderr.starts_with(&format!(
            "rookery: invalid config {}: unknown field `max_turn`",
            project.display()
        )),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("line 2"), "{}", out.stderr);
}

#[test]
fn a_project_file_may_not_set_hooks_unless_passed_with_config() {
    let sb = Sandbox::new();
    let project = write(
        &sb.ws().join(".rookery/config.yaml"),
        "hooks:\n  PreToolUse:\n    - matcher: \"*\"\n      hooks:\n        - type: command\n          command: touch pwned\n",
    );
    let out = sb.run(&["--script", "/nonexistent.json", "hi"]);
    out.expect_code(2);
    assert_eq!(
        out.stderr,
        format!(
            "rookery: project config {p} may not set hooks: hooks run commands (move it to your user config, or pass --config {p} to vouch for it)\n",
            p = project.display()
        )
    );
    assert!(!sb.ws().join("pwned").exists());
    let out = show(&sb, &["--config", s(&project)], &[]);
    out.expect_code(0);
    assert!(
        out.stdout
            .contains(&format!("#   config {}\n", project.display())),
        "{}",
        out.stdout
    );
    // A looser sandbox than the user's own is refused too.
    write(&user_file(&sb), "sandbox:\n  mode: read-only\n");
    write(
        &sb.ws().join(".rookery/config.yaml"),
        "sandbox:\n  mode: workspace-write\n",
    );
    let out = show(&sb, &[], &[]);
    out.expect_code(2);
    assert!(
        out.stderr
            .contains("may not set sandbox: sandbox.mode would be looser"),
        "{}",
        out.stderr
    );
}

#[test]
fn config_takes_the_project_files_place_and_discovery_can_be_turned_off() {
    let sb = Sandbox::new();
    let user = write(&user_file(&sb), "max_turns: 5\n");
    write(
        &sb.ws().join(".rookery/config.yaml"),
        "system_prompt: project\n",
    );
    let explicit = sb.file("explicit.yaml", "tools:\n  profile: openvaala\n");
    let out = show(&sb, &["--config", s(&explicit)], &[]);
    out.expect_code(0);
    assert_eq!(
        line(&out, "max_turns"),
        format!("max_turns: 5  # user {}", user.display())
    );
    assert!(
        line(&out, "system_prompt").ends_with("# default"),
        "{}",
        out.stdout
    );
    assert_eq!(
        line(&out, "  profile"),
        format!("  profile: \"openvaala\"  # config {}", explicit.display())
    );
    for (args, envs) in [
        (vec!["--no-config-discovery"], vec![]),
        (vec![], vec![("ROOKERY_NO_CONFIG", "1")]),
    ] {
        let out = show(&sb, &args, &envs);
        out.expect_code(0);
        assert_eq!(line(&out, "max_turns"), "max_turns: -1  # default");
        assert!(
            line(&out, "system_prompt").ends_with("# default"),
            "{}",
            out.stdout
        );
    }
}
