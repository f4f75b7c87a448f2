//! The session page's other controls in headless Chromium (helpers in `tests/common/browser.rs`):
//! add a schedule and delete it, roll back the last task, cancel a queued task, and fork the
//! session into a new one that the page opens. Each action is checked through the API too, so
//! a button that only changed the page would fail.

use crate::common::browser::*;
use crate::common::serve::*;

use fantoccini::Locator;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn schedules(server: &Server, id: &str) -> Vec<Value> {
    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{id}/schedules"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["schedules"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_schedules_rolls_back_cancels_queued_tasks_and_forks() {
    let dir = sandbox(&json!({"turns": [
        {"text": "first answer"},
        {"tool_calls": [{"name": "exec_command", "arguments": {
            "description": "hold", "yield_time_ms": 60000,
            "cmd": "while [ ! -f go ]; do sleep 0.05; done; echo released"}}]},
        {"text": "held answer"}
    ]}));
    let server = serve_on(dir, "127.0.0.1:0");
    let id = server.create(Some("allow-all")).await;
    let after = server.task(&id, "first prompt").await;
    server.events_until_task_end(&id, after).await;

    let (_driver, c) = browser().await;
    c.goto(&format!("{}/", server.base)).await.unwrap();
    sign_in(&c, TOKEN).await;
    c.wait()
        .at_most(UI_WAIT)
        .for_element(Locator::LinkText(&id))
        .await
        .unwrap_or_else(|e| panic!("session {id} not listed: {e}"))
        .click()
        .await
        .unwrap();

    // A schedule added in the page is the server's; its Delete removes it there.
    let cron = c
        .wait()
        .at_most(UI_WAIT)
        .for_element(Locator::Css("input[aria-label='Cron pattern']"))
        .await
        .unwrap();
    cron.send_keys("0 0 1 1 *").await.unwrap();
    c.find(Locator::Css("input[aria-label='Scheduled task text']"))
        .await
        .unwrap()
        .send_keys("new year's task")
        .await
        .unwrap();
    button(&c, "Add schedule").await.click().await.unwrap();
    until(
        &c,
        "the schedule listed",
        "return document.querySelectorAll('.schedule-list li[data-schedule]').length === 1",
    )
    .await;
    let listed = schedules(&server, &id).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["cron"], "0 0 1 1 *");
    assert_eq!(listed[0]["text"], "new year's task");
    let shown: String = serde_json::from_value(
        until(
            &c,
            "the schedule's text",
            "return document.querySelector('.schedule-list li')?.innerText",
        )
        .await,
    )
    .unwrap();
    assert!(shown.contains("new year's task"), "{shown}");
    button(&c, "Delete").await.click().await.unwrap();
    until(
        &c,
        "the schedule gone",
        "return document.querySelectorAll('.schedule-list li[data-schedule]').length === 0",
    )
    .await;
    assert!(schedules(&server, &id).await.is_empty());

    // Roll back the last task: the page says files are not reverted, the trace records it.
    button(&c, "Roll back last task")
        .await
        .click()
        .await
        .unwrap();
    until(
        &c,
        "the rollback's answer",
        "return document.querySelector('.info')?.innerText.includes('dropped 1 task(s); files not reverted')",
    )
    .await;
    let trace = std::fs::read_to_string(server.trace(&id)).unwrap();
    assert!(
        trace.contains("\"rollback\""),
        "no rollback record:\n{trace}"
    );

    // A task held by a command, and one queued behind it: Cancel takes it out of the queue.
    let after = server.task(&id, "hold prompt").await;
    let (s, v) = server
        .call(
            "POST",
            &format!("/v1/sessions/{id}/tasks"),
            Some(json!({"text": "queued prompt", "if_busy": "enqueue"})),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{v}");
    until(
        &c,
        "the queued task",
        "return document.querySelector('.queue li[data-entry]')?.innerText.includes('queued prompt')",
    )
    .await;
    button(&c, "Cancel").await.click().await.unwrap();
    until(
        &c,
        "the queue emptied",
        "return document.querySelectorAll('.queue li[data-entry]').length === 0",
    )
    .await;
    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{id}"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["queue"].as_array().map_or(0, Vec::len), 0, "{v}");
    std::fs::write(server.ws().join("go"), "").unwrap();
    server.events_until_task_end(&id, after).await;

    // Fork: a new session, which the page opens.
    button(&c, "Fork").await.click().await.unwrap();
    let fork: String = serde_json::from_value(
        until(
            &c,
            "the fork's page",
            &format!(
                "const m = location.hash.match(/^#\\/sessions\\/([^/]+)$/); \
                 return m && m[1] !== '{id}' ? decodeURIComponent(m[1]) : null"
            ),
        )
        .await,
    )
    .unwrap();
    let (s, v) = server
        .call("GET", &format!("/v1/sessions/{fork}"), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let fork_trace = std::fs::read_to_string(server.trace(&fork)).unwrap();
    let meta: Value = serde_json::from_str(fork_trace.lines().next().unwrap()).unwrap();
    assert_eq!(meta["payload"]["forked_from"]["session_id"], id, "{meta}");
    until(
        &c,
        "the fork's own page",
        &format!("return document.querySelector('h1.session-id')?.innerText === '{fork}'"),
    )
    .await;
}
