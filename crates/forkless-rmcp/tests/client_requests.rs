//! An rmcp service's requests to the client (`roots/list`, `sampling/createMessage`) made
//! from a tool call travel through forkless to rmcp's own client, which answers them; the
//! answers reach the service, and the tool's result carries what the client said. Both go
//! the way a stdio child's do (the message layer, `forkless_server::backend`): on the
//! stream of the call that caused them, under ids of the layer's own.
// Roots and sampling are the session revisions' requests to the client; rmcp marks them
// deprecated (SEP-2577) and still serves them.
#![allow(deprecated)]

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, CreateMessageRequestParams, CreateMessageResult,
    ListRootsResult, Root, SamplingMessage, ServerCapabilities, ServerConfig as RmcpServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{
    ErrorData, RoleClient, RoleServer, ServerHandler, ServiceExt as _, tool, tool_handler, tool_router,
};

use forkless_server::ServerConfig;
use forkless_store::MemoryStore;

/// A service whose tools ask the client.
#[derive(Clone, Debug)]
struct Asker {
    tool_router: rmcp::handler::server::router::tool::ToolRouter<Self>,
}

#[tool_router]
impl Asker {
    fn new() -> Self {
        Self { tool_router: Self::tool_router() }
    }

    #[tool(description = "The client's roots, as URIs")]
    async fn roots(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let roots =
            ctx.peer.list_roots().await.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let uris: Vec<String> = roots.roots.into_iter().map(|r| r.uri).collect();
        Ok(CallToolResult::success(vec![ContentBlock::text(uris.join(","))]))
    }

    #[tool(description = "What the client's model says")]
    async fn sample(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let ask = CreateMessageRequestParams::new(vec![SamplingMessage::user_text("say hello")], 16);
        let answer =
            ctx.peer.create_message(ask).await.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let text = answer.message.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone());
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "{} said {}",
            answer.model,
            text.unwrap_or_default()
        ))]))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Asker {
    fn get_info(&self) -> RmcpServerConfig {
        RmcpServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

/// rmcp's client, with roots and a model of its own.
#[derive(Clone, Default)]
struct Answers;

impl rmcp::ClientHandler for Answers {
    async fn list_roots(&self, _: RequestContext<RoleClient>) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::new(vec![Root::new("file:///forkless/a"), Root::new("file:///forkless/b")]))
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let asked = params.messages.first().and_then(|m| m.content.first()).and_then(|c| c.as_text());
        let reply = format!("hello (asked: {})", asked.map_or("", |t| t.text.as_str()));
        Ok(CreateMessageResult::new(SamplingMessage::assistant_text(reply), "test-model".into()))
    }
}

fn text(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_requests_reach_rmcps_client_and_its_answers_come_back() {
    use rmcp::transport::StreamableHttpClientTransport;
    let server = forkless_rmcp::server(MemoryStore::new(), || Ok(Asker::new()), ServerConfig::default())
        .expect("valid config");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    let client =
        Answers.serve(StreamableHttpClientTransport::from_uri(url)).await.expect("rmcp's client connects");

    let call = |name: &'static str| {
        let client = &client;
        async move {
            let call = tokio::time::timeout(
                std::time::Duration::from_secs(15),
                client.call_tool(CallToolRequestParams::new(name)),
            );
            call.await
                .unwrap_or_else(|_| panic!("{name} is answered"))
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        }
    };
    let roots = call("roots").await;
    assert_ne!(roots.is_error, Some(true), "{roots:?}");
    assert_eq!(text(&roots), "file:///forkless/a,file:///forkless/b");
    let sampled = call("sample").await;
    assert_ne!(sampled.is_error, Some(true), "{sampled:?}");
    assert_eq!(text(&sampled), "test-model said hello (asked: say hello)");
    // Twice more, so a second request of the service reuses nothing of the first's.
    assert_eq!(text(&call("roots").await), "file:///forkless/a,file:///forkless/b");
    let _ = client.cancel().await;
}
