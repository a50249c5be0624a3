//! The console's read-only API: `GET /v1/queries` lists the caller's own recent queries, and
//! `GET /v1/manifest/routes` shows the manifest's routing table. Both need a caller; bad
//! `limit`s are refused with the field and the rule named.

use switchyard_engine::handlers::handle_http;
use switchyard_tests::*;

fn list(user: &str, query: &str) -> aws_lambda_events::apigw::ApiGatewayV2httpRequest {
    api_request("GET", "/v1/queries", query, None, user, "")
}

#[tokio::test(start_paused = true)]
async fn a_caller_lists_only_their_own_queries_newest_first() {
    // GIVEN two queries by one analyst and one by another.
    let h = Harness::start(shipped_manifest());
    let mut mine = Vec::new();
    for q in ["Which regions are underperforming against benchmark?", "Why did TRx drop in the Northeast?"] {
        let r = h.post(q, "analyst-1", "").await;
        assert_eq!(r.status_code, 202, "{}", text_body(&r));
        mine.push(json_body(&r)["query_id"].as_str().expect("id").to_string());
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let theirs = h.post("Where are the gaps in market share?", "analyst-2", "").await;
    let theirs = json_body(&theirs)["query_id"].as_str().expect("id").to_string();

    // WHEN the first analyst lists their queries.
    let r = handle_http(&h.system.deps, list("analyst-1", "")).await;

    // THEN they see their two, newest first, with question, intent and status; not the other's.
    assert_eq!(r.status_code, 200, "{}", text_body(&r));
    let body = json_body(&r);
    let listed: Vec<&str> =
        body["queries"].as_array().expect("queries").iter().map(|q| q["query_id"].as_str().expect("id")).collect();
    assert_eq!(listed, [mine[1].as_str(), mine[0].as_str()]);
    assert!(!listed.contains(&theirs.as_str()));
    assert_eq!(body["queries"][0]["question"], "Why did TRx drop in the Northeast?");
    assert!(body["queries"][0]["intent"].as_str().is_some_and(|i| !i.is_empty()));
    assert!(body["queries"][0]["status"].is_string());

    // AND a limit of 1 returns only the newest.
    let r = handle_http(&h.system.deps, list("analyst-1", "limit=1")).await;
    assert_eq!(json_body(&r)["queries"].as_array().expect("queries").len(), 1);
    assert_eq!(json_body(&r)["queries"][0]["query_id"], mine[1].as_str());

    // AND a caller with no queries gets an empty list, not an error.
    let r = handle_http(&h.system.deps, list("nobody", "")).await;
    assert_eq!((r.status_code, json_body(&r)["queries"].as_array().map(Vec::len)), (200, Some(0)));
}

#[tokio::test(start_paused = true)]
async fn a_bad_limit_is_refused_naming_the_field_and_the_rule() {
    let h = Harness::start(shipped_manifest());
    for bad in ["limit=0", "limit=101", "limit=-1", "limit=ten", "limit=", "limit=99999999999999999999999"] {
        let r = handle_http(&h.system.deps, list("analyst-1", bad)).await;
        assert_eq!(r.status_code, 400, "{bad}: {}", text_body(&r));
        let body = json_body(&r);
        assert_eq!(body["error"]["details"][0]["field"], "limit", "{bad}");
        assert_eq!(body["error"]["details"][0]["rule"], "a whole number from 1 to 100", "{bad}");
    }
}

#[tokio::test(start_paused = true)]
async fn listing_and_the_routing_table_need_a_caller() {
    let h = Harness::start(shipped_manifest());
    for path in ["/v1/queries", "/v1/manifest/routes"] {
        let mut request = api_request("GET", path, "", None, "ignored", "");
        request.request_context.authorizer = None;
        let r = handle_http(&h.system.deps, request).await;
        assert_eq!(r.status_code, 401, "{path}: {}", text_body(&r));
    }
    // A method the route does not serve is 405, not a listing.
    let r = handle_http(&h.system.deps, api_request("DELETE", "/v1/queries", "", None, "analyst-1", "")).await;
    assert_eq!(r.status_code, 405);
    let r = handle_http(&h.system.deps, api_request("POST", "/v1/manifest/routes", "", Some("{}"), "a", "")).await;
    assert_eq!(r.status_code, 405);
}

#[tokio::test(start_paused = true)]
async fn the_routing_table_shows_each_intent_with_its_agents_tiers_and_timeouts() {
    let h = Harness::start(shipped_manifest());
    let r = handle_http(&h.system.deps, api_request("GET", "/v1/manifest/routes", "", None, "analyst-1", "")).await;
    assert_eq!(r.status_code, 200, "{}", text_body(&r));
    let body = json_body(&r);
    let manifest = shipped_manifest();
    assert_eq!(body["routes"].as_array().expect("routes").len(), manifest.intents.len());
    assert_eq!(body["tiers"].as_array().expect("tiers").len(), manifest.tiers.len());
    let gap = body["routes"].as_array().expect("routes").iter().find(|r| r["intent"] == "gap_analysis").expect("gap");
    assert_eq!(gap["mode"], "direct");
    assert_eq!(gap["agents"][0]["agent"], "gap_analyzer");
    assert_eq!(gap["agents"][0]["role"], "primary");
    assert_eq!(gap["agents"][1]["agent"], "resource_optimizer");
    assert_eq!(gap["agents"][1]["role"], "supporting");
    let agent = manifest.agent("gap_analyzer").expect("declared");
    assert_eq!(gap["agents"][0]["tier"], agent.tier);
    assert_eq!(gap["agents"][0]["timeout_ms"], manifest.agent_timeout(agent).map(|d| d.as_millis()).expect("timeout"));
}
