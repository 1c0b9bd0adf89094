//! Test support: the real REST API on `127.0.0.1:0` over the real coordinator on a fresh
//! SQLite database, scripted agents from `scenarios/demo.toml` answering every call, and real
//! bearer tokens issued by the SQLite token store.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentroom_agents::PriceTable;
use agentroom_agents::hosted::{HostedReconciler, HostedSpecialists};
use agentroom_agents::scripted::{Journal, JournalReconciler, Scenario, Scripted};
use agentroom_coordinator::RunnerConfig;
use agentroom_coordinator::{Coordinator, CoordinatorConfig, InputId};
use agentroom_domain::catalog::{DeclaredOutput, MemoryCatalog, MemoryEntry, OutputType};

fn declared(name: &str, kind: OutputType) -> DeclaredOutput {
    DeclaredOutput {
        name: name.to_owned(),
        kind,
        description: None,
    }
}
use agentroom_domain::engine::MembershipChange;
use agentroom_domain::engine::Reconciliation;
use agentroom_domain::ids::{PrincipalId, RoomId, Timestamp};
use agentroom_domain::money::UsdMicros;
use agentroom_domain::policy::{AccessPolicy, RoomPolicy};
use agentroom_domain::room::Role;
use agentroom_domain::state::{RoomSetup, RoomState};
use agentroom_planning::{PlanningService, SystemAmbient};
use agentroom_ports::tokens::RANDOM_BYTES;
use agentroom_ports::{Clock, NewToken, SystemClock, TokenMaterial, TokenRecord, TokenStore};
use agentroom_ports::{OperationRecord, ReconcileError, Reconciler};
use agentroom_server::api::{self, Api, Feed};
use agentroom_store_sqlite::{Durability, SqlitePlanning, SqliteRooms};
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::time::timeout;

/// How long any one network step may take before the test fails (a hang, not a measure).
pub const STEP: Duration = Duration::from_secs(30);

pub type RoomCoordinator = Coordinator;

/// The scripted agents' reconciler, with the hosted specialists' first for their calls: the
/// composition `agentroom serve --hosted` makes.
pub struct TestReconciler {
    scripted: JournalReconciler,
    hosted: Option<HostedReconciler>,
}

#[async_trait::async_trait]
impl Reconciler for TestReconciler {
    async fn reconcile(
        &self,
        operation: &OperationRecord,
    ) -> Result<Option<Reconciliation>, ReconcileError> {
        match &self.hosted {
            Some(hosted) if hosted.covers(operation) => hosted.reconcile(operation).await,
            _ => self.scripted.reconcile(operation).await,
        }
    }
}

pub fn p(id: &str) -> PrincipalId {
    PrincipalId::parse(id).unwrap()
}

pub fn local() -> RoomId {
    RoomId::parse("local").unwrap()
}

/// Who holds a token in the tests, and with which role in `local` (`nora` holds none).
pub const PEOPLE: [(&str, Option<Role>); 7] = [
    ("olive", Some(Role::Owner)),
    ("oscar", Some(Role::Operator)),
    ("rita", Some(Role::Reviewer)),
    ("sam", Some(Role::Specialist)),
    ("sue", Some(Role::Specialist)),
    ("hank", Some(Role::AgentHost)),
    ("nora", None),
];

/// A running API and what a test needs besides HTTP: the store and coordinator (the host's
/// side, for waiting until the Room is quiet and delivering notifications), and tokens.
pub struct App {
    pub base: String,
    client: Client<HttpConnector, Full<Bytes>>,
    pub coordinator: RoomCoordinator,
    pub store: Arc<SqliteRooms>,
    pub feed: Arc<Feed>,
    pub tokens: HashMap<String, String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _dir: tempfile::TempDir,
}

/// A finished response.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }

    /// A REST error: this status and `{"error": code, "message": text}`.
    pub fn assert_error(&self, status: StatusCode, code: &str) -> Value {
        assert_eq!(self.status, status, "{self:?}");
        let body = self.json();
        assert_eq!(body["error"], code, "{body}");
        assert!(
            body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{body}"
        );
        body
    }
}

fn random() -> [u8; RANDOM_BYTES] {
    let mut bytes = [0u8; RANDOM_BYTES];
    agentroom_ports::Random::fill(&agentroom_ports::SystemRandom, &mut bytes).unwrap();
    bytes
}

/// Issues a real token for `principal` in `room`, expiring at `expires_at`.
pub async fn issue(
    store: &SqliteRooms,
    room: &RoomId,
    principal: &str,
    expires_at: Option<Timestamp>,
) -> (TokenRecord, String) {
    let issued = store
        .issue_token(
            NewToken {
                room: room.clone(),
                principal: p(principal),
                created_at: SystemClock.now(),
                expires_at,
                label: None,
            },
            TokenMaterial::from_random(random()),
        )
        .await
        .unwrap();
    (issued.record.clone(), issued.text().to_owned())
}

/// The demo scenario, with the review left to a human reviewer when `human_review`.
fn scenario() -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/demo.toml");
    Scenario::from_file(&path).unwrap()
}

/// Starts the API over a fresh Room `local` set up from the demo scenario: owner olive,
/// operator oscar, specialists sam and sue, reviewer rita, agent host hank; reviews by a human
/// (`policies/room.toml` `[review] source = "human"`), so the reviewer acts over HTTP.
pub async fn spawn_app() -> App {
    spawn_app_hosting(&[]).await
}

/// [`spawn_app`] with the specialists `hosted` executed by agent hosts over the API: their
/// calls wait for the results submitted to `/v1/rooms/local/assignments/{operation}/result`.
pub async fn spawn_app_hosting(hosted: &[&str]) -> App {
    spawn_app_configured(hosted, |_| {}).await
}

/// [`spawn_app_hosting`] with the A2E transport's settings as `configure` leaves them (its
/// Room, `local`, first).
pub async fn spawn_app_configured(
    hosted: &[&str],
    configure: impl FnOnce(&mut agentroom_server::ServerConfig),
) -> App {
    spawn_app_with(
        hosted,
        configure,
        agentroom_server::ConnectionLimits::default(),
        agentroom_server::DEFAULT_STREAMS_PER_PRINCIPAL,
    )
    .await
}

/// [`spawn_app_configured`] served within `limits`, with at most `streams_per_principal`
/// notification streams per principal.
pub async fn spawn_app_with(
    hosted: &[&str],
    configure: impl FnOnce(&mut agentroom_server::ServerConfig),
    limits: agentroom_server::ConnectionLimits,
    streams_per_principal: usize,
) -> App {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentroom.db");
    agentroom_store_sqlite::migrate::up(&path).unwrap();
    let store = Arc::new(SqliteRooms::open(&path, Durability::ProcessCrash).unwrap());
    let scenario = scenario();
    let spec = scenario.room().cloned().unwrap();
    let journal = Arc::new(Journal::open(dir.path().join("journal.jsonl")).unwrap());
    let scripted = Arc::new(Scripted::new(scenario).with_journal(journal));
    let reconciler = scripted.reconciler().unwrap();
    let desk = (!hosted.is_empty()).then(|| {
        let journal = Arc::new(Journal::open(dir.path().join("hosted-journal.jsonl")).unwrap());
        Arc::new(HostedSpecialists::new(
            hosted.iter().map(|who| p(who)),
            journal,
        ))
    });
    let provider = match &desk {
        Some(desk) => desk.install(scripted.agents()),
        None => scripted.agents(),
    };
    let reconciler = TestReconciler {
        scripted: reconciler,
        hosted: desk.as_ref().map(HostedSpecialists::reconciler),
    };
    // The scenario's bindings, declaring the outputs the shipped capabilities declare (T2).
    let catalog = spec
        .bindings
        .iter()
        .fold(MemoryCatalog::new(), |c, (capability, provider)| {
            let outputs = match capability.as_str() {
                "research" => vec![declared("findings", OutputType::Array)],
                "writing" => vec![declared("report", OutputType::String)],
                _ => Vec::new(),
            };
            c.with(
                capability,
                MemoryEntry {
                    provider: Some(provider.clone()),
                    outputs,
                    ..MemoryEntry::default()
                },
            )
        });
    let feed = Arc::new(Feed::new().with_streams_per_principal(streams_per_principal));
    let coordinator = Coordinator::builder(
        store.clone(),
        CoordinatorConfig::new(RunnerConfig::new("rest-test", Duration::from_secs(30))),
    )
    .provider(Arc::new(provider))
    .reconciler(Arc::new(reconciler))
    .clock(Arc::new(SystemClock))
    .catalog(Arc::new(catalog))
    .notifier(Arc::clone(&feed) as _);
    let coordinator = match &desk {
        Some(desk) => coordinator.desk(Arc::clone(desk) as _),
        None => coordinator,
    }
    .build();
    let room = local();
    let state = RoomState::new(RoomSetup {
        room: room.clone(),
        owner: spec.owner.clone(),
        policy: RoomPolicy::from_toml("[review]\nsource = \"human\"\n").unwrap(),
        access: AccessPolicy::default(),
        quotes: PriceTable::shipped().unwrap().quotes("scripted").unwrap(),
        limit: UsdMicros::new(spec.limit_micros),
    })
    .unwrap();
    coordinator.recover().await.unwrap();
    coordinator.create_room(&state).await.unwrap();
    let mut grants: Vec<(PrincipalId, Role)> = spec
        .members
        .iter()
        .flat_map(|(who, roles)| roles.iter().map(|role| (who.clone(), *role)))
        .collect();
    grants.push((p("hank"), Role::AgentHost));
    for (who, role) in grants {
        coordinator
            .change_membership(
                &room,
                InputId::named(&format!("grant {who} {role:?}")),
                spec.owner.clone(),
                who,
                role,
                MembershipChange::Grant,
            )
            .await
            .unwrap();
    }
    let mut tokens = HashMap::new();
    for (who, _) in PEOPLE {
        let (_, text) = issue(&store, &room, who, None).await;
        tokens.insert(who.to_owned(), text);
    }
    // As `serve` wires it: the objectives' plans are on the planning board too.
    let planning = Arc::new(
        PlanningService::new(
            Arc::new(SqlitePlanning::open(&path, Durability::ProcessCrash).unwrap()),
            Arc::new(SystemAmbient),
        )
        .with_coordinator_plans(Arc::new(coordinator.clone())),
    );
    // Mounted the way the host does: the A2E transport (with bearer tokens) merged with the
    // REST API, request ids on both.
    let api = Api {
        rooms: coordinator.clone(),
        planning,
        feed: Arc::clone(&feed),
    };
    let mut config = agentroom_server::ServerConfig::new(room.clone());
    configure(&mut config);
    let a2e = agentroom_server::authenticated_router(config, &api);
    let rest = api::router(api);
    let router = api::with_request_ids(a2e).merge(rest);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(agentroom_server::serve_with(
        listener,
        router,
        limits,
        async move {
            let _ = stopped.await;
        },
    ));
    App {
        base: format!("http://{address}"),
        client: Client::builder(TokioExecutor::new()).build_http(),
        coordinator,
        store,
        feed,
        tokens,
        stop: Some(stop),
        server: Some(server),
        _dir: dir,
    }
}

impl App {
    /// Stops the server gracefully and waits until it has stopped (a hang fails the test).
    pub async fn shut_down(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            timeout(STEP, server)
                .await
                .expect("the server did not stop")
                .unwrap()
                .unwrap();
        }
    }

    pub fn token(&self, who: &str) -> &str {
        &self.tokens[who]
    }

    /// Sends a request and returns its response head and unread body.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> hyper::Response<Incoming> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(Full::new(body.into())).unwrap();
        timeout(STEP, self.client.request(request))
            .await
            .expect("no answer in time")
            .unwrap()
    }

    /// Sends a request and reads the whole response.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: impl Into<Bytes>,
    ) -> Answer {
        let response = self.send(method, path, headers, body).await;
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = timeout(STEP, response.into_body().collect())
            .await
            .expect("no body in time")
            .unwrap()
            .to_bytes();
        Answer {
            status,
            headers,
            body: String::from_utf8(bytes.to_vec()).unwrap(),
        }
    }

    /// A call as `who` (with their bearer token).
    pub async fn as_(&self, who: &str, method: Method, path: &str, body: &str) -> Answer {
        let auth = format!("Bearer {}", self.token(who));
        self.call(
            method,
            path,
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            body.to_owned(),
        )
        .await
    }

    pub async fn get(&self, who: &str, path: &str) -> Value {
        let answer = self.as_(who, Method::GET, path, "").await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "GET {path} as {who}: {answer:?}"
        );
        answer.json()
    }

    pub async fn post(&self, who: &str, path: &str, body: &str) -> Value {
        let answer = self.as_(who, Method::POST, path, body).await;
        assert!(
            answer.status.is_success(),
            "POST {path} as {who}: {answer:?}"
        );
        answer.json()
    }

    /// Waits until no call runs and the outbox is delivered to the feed: the host's side.
    pub async fn settle(&self) {
        timeout(STEP, self.coordinator.wait_idle())
            .await
            .expect("the room did not get quiet");
        self.coordinator.deliver_notifications().await.unwrap();
    }

    /// What a client can see that shows whether anything changed: the Room's revision, and
    /// the ledger.
    pub async fn snapshot(&self) -> (Value, Value) {
        let room = self.get("oscar", "/v1/rooms/local").await;
        let budget = self.get("oscar", "/v1/rooms/local/budget?limit=200").await;
        (room["revision"].clone(), budget)
    }
}
