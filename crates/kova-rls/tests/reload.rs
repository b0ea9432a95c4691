//! Reloading a changed configuration: unchanged limits keep their state, a changed quota keeps
//! what was consumed, a bad file is refused while the old configuration serves.

mod common;

use std::path::Path;

use common::*;

const RELOADS_OK: &str = r#"kova_rls_config_reloads_total{result="ok"}"#;
const RELOADS_ERROR: &str = r#"kova_rls_config_reloads_total{result="error"}"#;
const CURRENT: &str = "kova_rls_config_current";

fn config(user_per_hour: u32, other_per_hour: u32) -> String {
    format!(
        "domain: r
descriptors:
  - key: user
    rate_limit: {{ unit: hour, requests_per_unit: {user_per_hour} }}
  - key: other
    rate_limit: {{ unit: hour, requests_per_unit: {other_per_hour} }}
"
    )
}

/// Replaces the file whole (write then rename), as a deployment would.
fn replace(path: &Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).expect("writes");
    std::fs::rename(&next, path).expect("renames");
}

async fn remaining(service: &Service, key: &str) -> (i32, u32, Option<u32>) {
    let mut client = service.client().await;
    let response = client
        .should_rate_limit(request("r", vec![descriptor(&[(key, "u")])], 0))
        .await
        .expect("a decision")
        .into_inner();
    let status = &response.statuses[0];
    (
        response.overall_code,
        status.limit_remaining,
        status.current_limit.as_ref().map(|l| l.requests_per_unit),
    )
}

#[tokio::test]
async fn reload_keeps_state_and_refuses_a_bad_file() {
    let path = temp_file("reload", "config.yaml", &config(3, 1));
    let service = Service::start(&path, &["--reload-interval-ms", "50"]);
    assert_eq!(service.metric(RELOADS_OK), 1.0);
    assert_eq!(remaining(&service, "user").await, (Code::Ok as i32, 2, Some(3)));
    assert_eq!(remaining(&service, "user").await, (Code::Ok as i32, 1, Some(3)));

    // Another rule changes: the user's counter goes on where it was.
    replace(&path, &config(3, 2));
    service.wait_metric(RELOADS_OK, 2.0);
    assert_eq!(remaining(&service, "other").await, (Code::Ok as i32, 1, Some(2)));
    assert_eq!(remaining(&service, "user").await, (Code::Ok as i32, 0, Some(3)));

    // The user's quota grows: the 3 units used stay used, of 5.
    replace(&path, &config(5, 2));
    service.wait_metric(RELOADS_OK, 3.0);
    assert_eq!(remaining(&service, "user").await, (Code::Ok as i32, 1, Some(5)));

    // A bad file: refused, counted, and the last good configuration keeps serving.
    replace(&path, &config(5, 2).replace("unit: hour", "unit: fortnight"));
    service.wait_metric(RELOADS_ERROR, 1.0);
    assert_eq!(service.metric(CURRENT), 0.0);
    assert_eq!(remaining(&service, "user").await, (Code::Ok as i32, 0, Some(5)));
    assert_eq!(remaining(&service, "user").await, (Code::OverLimit as i32, 0, Some(5)));
    // Refused once, not once per poll.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(service.metric(RELOADS_ERROR), 1.0);

    // Fixed again: serving the file's configuration, the state still kept.
    replace(&path, &config(5, 2));
    service.wait_metric(RELOADS_OK, 4.0);
    assert_eq!(service.metric(CURRENT), 1.0);
    assert_eq!(remaining(&service, "user").await, (Code::OverLimit as i32, 0, Some(5)));
    let _ = std::fs::remove_dir_all(path.parent().expect("its directory"));
}

/// SIGTERM does not wait for the reloader's next poll: with a poll a minute away, the service
/// still stops at once (the calls drained, nothing in flight).
#[tokio::test]
async fn shutdown_does_not_wait_for_the_next_poll() {
    let path = temp_file("reload-shutdown", "config.yaml", &config(3, 1));
    let service = Service::start(&path, &["--reload-interval-ms", "60000"]);
    assert_eq!(remaining(&service, "user").await, (Code::Ok as i32, 2, Some(3)));
    let start = std::time::Instant::now();
    let status = tokio::task::spawn_blocking(move || service.terminate()).await.expect("joins");
    assert!(status.success(), "{status:?}");
    assert!(start.elapsed() < std::time::Duration::from_secs(8), "{:?}", start.elapsed());
    let _ = std::fs::remove_dir_all(path.parent().expect("its directory"));
}
