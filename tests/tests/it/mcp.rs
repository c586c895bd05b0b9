//! The inspector as an MCP server, driven through a real session over a
//! byte stream (as on stdio) against a real server, connected as the
//! generated inspector ACL user: initialize, list the tools (their schemas
//! name the keyspace's kinds and indexes), read a damaged document and see
//! its missing entry, and get typed tool errors for bad arguments.

use microdcs_tests::fixtures::{JobResponse, Plant};
use microdcs_tests::unique_prefix;
use microdcs_valkey::redis::{self, aio::ConnectionManager};
use microdcs_valkey::{PutOutcome, Valkey, acl::AclRole, config::WriteOptions, inspect::Inspector};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const PASSWORD: &str = "mcp-inspector-pw-3";

/// One MCP client session: requests out, one reply line per request in.
struct Session {
    to_server: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    from_server: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    next: u64,
}

impl Session {
    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.to_server.write_all(line.as_bytes()).await.unwrap();
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.send(json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })).await;
        let line = self.from_server.next_line().await.unwrap().expect("a reply");
        let reply: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(reply["jsonrpc"], "2.0");
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let reply = self.request("tools/call", json!({ "name": tool, "arguments": arguments })).await;
        reply["result"].clone()
    }
}

#[tokio::test]
async fn an_mcp_session_reads_the_keyspace_as_the_inspector_user() {
    let server = microdcs_tests::own_server();
    let prefix = unique_prefix("mcp");
    // Written as the admin: a document, then one of its index entries removed.
    let admin = Valkey::connect_url(server.url(), prefix.clone(), WriteOptions::default()).await.unwrap();
    let responses = Plant::open(admin.clone()).store::<JobResponse>();
    let doc = JobResponse::new("r-9", "s1", "o-9", &["Running"]);
    assert_eq!(responses.create(&doc).await.unwrap(), PutOutcome::Written { version: 1 });
    let mut raw = ConnectionManager::new(redis::Client::open(server.url()).unwrap()).await.unwrap();
    let () = redis::cmd("SREM")
        .arg(format!("{}:jobresponse:bystate:s1:Running", prefix.as_str()))
        .arg("r-9")
        .query_async(&mut raw)
        .await
        .unwrap();
    // The inspector's user, from the generated rules.
    let mut setuser = redis::cmd("ACL");
    setuser.arg("SETUSER").arg("mcp-inspector");
    for rule in AclRole::Inspector.rules(&prefix) {
        setuser.arg(rule);
    }
    let () = setuser.arg(format!(">{PASSWORD}")).query_async(&mut raw).await.unwrap();
    let url = format!("redis://mcp-inspector:{PASSWORD}@{}/", server.host_port());
    let valkey = Valkey::connect_url(&url, prefix.clone(), WriteOptions::default()).await.unwrap();
    let inspector = Inspector::new(&Plant::open(valkey));

    let (client, server_end) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server_end);
    let serving = tokio::spawn(async move { inspector.serve_mcp(BufReader::new(server_read), server_write).await });
    let (client_read, client_write) = tokio::io::split(client);
    let mut s = Session { to_server: client_write, from_server: BufReader::new(client_read).lines(), next: 0 };

    let init = s
        .request("initialize", json!({ "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": { "name": "test", "version": "1" } }))
        .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    assert!(init["result"]["capabilities"]["tools"].is_object(), "{init}");
    s.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" })).await;

    let listed = s.request("tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().expect("tools").clone();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for expected in ["kinds", "scopes", "ids", "index_ids", "document", "dedupe", "lease", "changes"] {
        assert!(names.contains(&expected), "no tool `{expected}`: {names:?}");
    }
    let document = tools.iter().find(|t| t["name"] == "document").unwrap();
    let kinds = document["inputSchema"]["properties"]["kind"]["enum"].as_array().unwrap();
    assert!(kinds.contains(&json!("jobresponse")) && kinds.contains(&json!("joborder")), "{kinds:?}");
    let index_tool = tools.iter().find(|t| t["name"] == "index_ids").unwrap();
    assert!(index_tool["inputSchema"]["properties"]["index"]["enum"].as_array().unwrap().contains(&json!("by_state")));
    assert!(tools.iter().all(|t| t["annotations"]["readOnlyHint"] == true));

    // The damaged document: its by-state entry is missing.
    let found = s.call("document", json!({ "kind": "jobresponse", "id": "r-9" })).await;
    assert_eq!(found["isError"], false, "{found}");
    let view = &found["structuredContent"];
    assert_eq!(view["found"], true);
    assert_eq!(view["document"]["version"], "1");
    let entries = view["document"]["entries"].as_array().expect("entries");
    let by_state = entries.iter().find(|e| e["index"] == "by_state").expect("a by_state entry");
    assert_eq!(by_state["state"], "missing", "{by_state}");
    assert!(found["content"][0]["text"].as_str().unwrap().contains("missing"));
    let absent = s.call("document", json!({ "kind": "jobresponse", "id": "nobody" })).await;
    assert_eq!(absent["structuredContent"]["found"], false);
    let scopes = s.call("scopes", json!({ "kind": "jobresponse" })).await;
    assert_eq!(scopes["structuredContent"]["scopes"], json!(["s1"]));

    // Bad arguments: typed tool errors, the session goes on.
    let unknown_kind = s.call("scopes", json!({ "kind": "nokind" })).await;
    assert_eq!(unknown_kind["isError"], true);
    assert_eq!(unknown_kind["structuredContent"]["error"]["class"], "invalid_input");
    assert!(unknown_kind["structuredContent"]["error"]["message"].as_str().unwrap().contains("jobresponse"));
    let missing = s.call("document", json!({ "kind": "jobresponse" })).await;
    assert_eq!(missing["isError"], true);
    assert!(missing["structuredContent"]["error"]["message"].as_str().unwrap().contains("`id`"));
    let no_tool = s.request("tools/call", json!({ "name": "flushall", "arguments": {} })).await;
    assert_eq!(no_tool["error"]["code"], -32602, "{no_tool}");
    let no_method = s.request("resources/list", json!({})).await;
    assert_eq!(no_method["error"]["code"], -32601);
    let pong = s.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));

    // A line longer than the server holds, and one that is not UTF-8:
    // parse errors, and the session goes on.
    let huge = format!("{{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"ping\",\"p\":\"{}\"}}\n", "x".repeat(2 << 20));
    s.to_server.write_all(huge.as_bytes()).await.unwrap();
    let line = s.from_server.next_line().await.unwrap().expect("a reply");
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    s.to_server.write_all(b"\xff\xfe{}\n").await.unwrap();
    let line = s.from_server.next_line().await.unwrap().expect("a reply");
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["error"]["code"], -32700, "{reply}");
    let pong = s.request("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));

    // The end of input ends the server.
    drop(s);
    serving.await.unwrap().unwrap();
}

/// The stateless revision: `server/discover` lists every revision spoken,
/// a request naming 2026-07-28 in its `_meta` is served without a
/// handshake and its result says `complete`, a revision the server does
/// not speak is refused with -32022 and the supported list (nothing run),
/// and `initialize` negotiates the handshake revisions.
#[tokio::test]
async fn both_protocol_eras_are_spoken_and_an_unknown_revision_is_refused() {
    let server = microdcs_tests::server();
    let admin = Valkey::connect_url(server.url(), unique_prefix("mcp-eras"), WriteOptions::default()).await.unwrap();
    let inspector = Inspector::new(&Plant::open(admin));
    let (client, server_end) = tokio::io::duplex(1 << 16);
    let (server_read, server_write) = tokio::io::split(server_end);
    let serving = tokio::spawn(async move { inspector.serve_mcp(BufReader::new(server_read), server_write).await });
    let (client_read, client_write) = tokio::io::split(client);
    let mut s = Session { to_server: client_write, from_server: BufReader::new(client_read).lines(), next: 0 };
    let meta = |version: &str| json!({ "io.modelcontextprotocol/protocolVersion": version, "io.modelcontextprotocol/clientCapabilities": {} });

    let discovered = s.request("server/discover", json!({ "_meta": meta("2026-07-28") })).await;
    let result = &discovered["result"];
    assert_eq!(result["resultType"], "complete", "{discovered}");
    assert_eq!(
        result["supportedVersions"],
        json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"])
    );
    assert!(result["capabilities"]["tools"].is_object());
    assert_eq!(microdcs_valkey::inspect::MCP_PROTOCOL_VERSION, "2026-07-28");

    // No initialize: each request names its revision.
    let listed = s.request("tools/list", json!({ "_meta": meta("2026-07-28") })).await;
    assert_eq!(listed["result"]["resultType"], "complete");
    assert!(listed["result"]["tools"].as_array().unwrap().iter().any(|t| t["name"] == "document"));
    let called =
        s.request("tools/call", json!({ "_meta": meta("2026-07-28"), "name": "kinds", "arguments": {} })).await;
    assert_eq!(called["result"]["resultType"], "complete");
    assert_eq!(called["result"]["isError"], false, "{called}");

    // A revision nobody speaks: refused with what is spoken, no tool run.
    let refused =
        s.request("tools/call", json!({ "_meta": meta("2099-01-01"), "name": "kinds", "arguments": {} })).await;
    assert_eq!(refused["error"]["code"], -32022, "{refused}");
    assert_eq!(refused["error"]["data"]["requested"], "2099-01-01");
    assert_eq!(refused["error"]["data"]["supported"][0], "2026-07-28");
    assert!(refused.get("result").is_none());

    // The handshake era: a known revision is echoed, an unknown one is
    // answered with the newest handshake revision; no `resultType` there.
    let init = s.request("initialize", json!({ "protocolVersion": "2025-11-25", "capabilities": {} })).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    assert!(init["result"].get("resultType").is_none(), "{init}");
    let other = s.request("initialize", json!({ "protocolVersion": "2030-01-01", "capabilities": {} })).await;
    assert_eq!(other["result"]["protocolVersion"], "2025-11-25");
    let plain = s.request("tools/list", json!({})).await;
    assert!(plain["result"].get("resultType").is_none());

    drop(s);
    serving.await.unwrap().unwrap();
}
