//! Budget pools end to end (issue 18 part 5, B8): the real `agentroom` binary, on PostgreSQL.
//!
//! - The pool race: four Rooms drawing on one pool, served by two `serve` processes, and 32
//!   concurrent callers posting owner messages over REST until the pool refuses (its limit
//!   holds about 100 reservations). Then: 0 micros of overspend at the pool or any Room, the
//!   pool's log replays to its balances, the sum of the Rooms' charges is the pool's spent,
//!   and every reservation a Room holds or charged went through the pool.
//! - The host's `agentroom pool` commands: every bad argument refused with a clear error and
//!   nothing written.
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests: a failed unwrap is a failed test"
)]

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use agentroom_ports::domain::engine::Verdict;
use agentroom_ports::domain::ids::{OperationId, PoolId, RoomId};
use agentroom_ports::domain::ledger::{BudgetLedger, LedgerEntry};
use agentroom_ports::domain::rules::Rule;
use agentroom_ports::{PoolStore, RoomStore};
use agentroom_store_postgres::PgRooms;
use serde_json::json;
use support::Running;
use support::model::{listening, request};
use support::ok;
use support::{Database, migrate_up};

const ROOMS: [&str; 4] = ["north", "south", "east", "west"];
const POOL: &str = "campaign";
const CALLERS: usize = 32;
const MESSAGES_PER_CALLER: usize = 3;
/// What scenarios/two-serves.toml charges an objective: 2,100 (reasoner) + 3,400 (gather) +
/// 2,800 (write) + 1,200 (review) micros.
const CHARGED_PER_OBJECTIVE: i64 = 9_500;
/// How long the test waits for the processes to settle before it fails.
const PATIENCE: Duration = Duration::from_secs(120);

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn agentroom(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentroom"))
        .args(args)
        .args(["--database-url", url])
        .env_remove("AGENTROOM_DATABASE_URL")
        .env_remove("AGENTROOM_CRASH_AT")
        .env_remove("AGENTROOM_LOG")
        .output()
        .unwrap()
}

/// Creates Room `room` (olive owns it; sam, sue specialists; rita reviews); its owner token.
fn create_room(url: &str, room: &str) -> String {
    let policies = repo("policies");
    let out = ok(&agentroom(
        url,
        &[
            "room",
            "create",
            "--room",
            room,
            "--owner",
            "olive",
            "--member",
            "oscar=operator",
            "--member",
            "sam=specialist",
            "--member",
            "sue=specialist",
            "--member",
            "rita=reviewer",
            "--limit-micros",
            "100000000",
            "--policies",
            policies.to_str().unwrap(),
        ],
    ));
    out.lines()
        .find_map(|l| l.strip_prefix("owner token (olive): "))
        .unwrap_or_else(|| panic!("no owner token: {out}"))
        .to_owned()
}

fn serve(url: &str, journal: &Path) -> (Running, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentroom"));
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(["--database-url", url])
        .arg("--policies")
        .arg(repo("policies"))
        .arg("--agents")
        .arg(repo("scenarios/two-serves.toml"))
        .arg("--journal")
        .arg(journal)
        .args(["--lease-ms", "5000", "--poll-ms", "50"])
        .env_remove("AGENTROOM_DATABASE_URL")
        .env_remove("AGENTROOM_CRASH_AT")
        .env_remove("AGENTROOM_LOG")
        .stderr(Stdio::inherit());
    listening(command, "agentroom listening on http://")
}

fn room_id(name: &str) -> RoomId {
    RoomId::parse(name).unwrap()
}

/// Waits until no Room has an open call or an unaccepted event, five times in a row 500 ms
/// apart.
async fn settled(store: &PgRooms) {
    let deadline = Instant::now() + PATIENCE;
    let mut quiet = 0;
    loop {
        let mut busy = Vec::new();
        for name in ROOMS {
            let room = store.load(&room_id(name)).await.unwrap().unwrap();
            let open = room.state.operations().len();
            let unaccepted = store
                .unaccepted_events(&room_id(name), 10)
                .await
                .unwrap()
                .len();
            if open + unaccepted > 0 {
                busy.push(format!("{name}: {open} open, {unaccepted} unaccepted"));
            }
        }
        quiet = if busy.is_empty() { quiet + 1 } else { 0 };
        // Work waiting on the pool shows as neither open nor unaccepted: quiet for 2 s, long
        // enough for the serves' passes (every 50 ms, every Room now and then) to resume it
        // on a loaded machine.
        if quiet >= 5 {
            return;
        }
        assert!(Instant::now() < deadline, "never settled: {busy:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// B7, B8: the pool race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b8_four_rooms_two_serves_32_callers_never_overspend_their_pool() {
    let db = Database::create();
    let url = db.url();
    migrate_up(&url);
    let tokens: Vec<String> = ROOMS.iter().map(|room| create_room(&url, room)).collect();
    let store = PgRooms::connect(&url).await.unwrap();
    // About 100 reservations: what 25 objectives are charged (one reasoner call, two
    // specialists, one review, each charged what scenarios/two-serves.toml says) plus the
    // largest quote, so that the last reservations are refused for want of the pool.
    let quotes = store
        .load(&room_id(ROOMS[0]))
        .await
        .unwrap()
        .unwrap()
        .state
        .quotes();
    let largest = quotes
        .reasoner
        .max(quotes.specialist)
        .max(quotes.reviewer)
        .micros();
    let limit = 25 * CHARGED_PER_OBJECTIVE + largest;
    ok(&agentroom(
        &url,
        &[
            "pool",
            "create",
            "--pool",
            POOL,
            "--limit-micros",
            &limit.to_string(),
        ],
    ));
    for room in ROOMS {
        let attached = ok(&agentroom(
            &url,
            &["pool", "attach", "--pool", POOL, "--room", room],
        ));
        assert!(attached.contains("draws on pool campaign"), "{attached}");
    }

    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.jsonl");
    let (_one, first) = serve(&url, &journal);
    let (_two, second) = serve(&url, &journal);
    let addresses = [first, second];

    // 32 callers at once, each posting its owner messages to one Room through one process.
    let callers: Vec<_> = (0..CALLERS)
        .map(|caller| {
            let address = addresses[caller % 2].clone();
            let room = ROOMS[caller % ROOMS.len()];
            let token = tokens[caller % ROOMS.len()].clone();
            std::thread::spawn(move || {
                for n in 0..MESSAGES_PER_CALLER {
                    let (status, body) = request(
                        &address,
                        "POST",
                        &format!("/v1/rooms/{room}/events"),
                        &token,
                        Some(&json!({
                            "kind": "owner_message",
                            "text": format!("Summarize durable agent runtimes (caller {caller}, message {n}), with sources."),
                        })),
                    );
                    assert_eq!(status, 202, "{body}");
                }
            })
        })
        .collect();
    for caller in callers {
        caller.join().unwrap();
    }
    settled(&store).await;

    let pool_id = PoolId::parse(POOL).unwrap();
    let pool = store.load_pool(&pool_id).await.unwrap().unwrap().ledger;
    let balances = pool.balances();
    assert_eq!(balances.limit.micros(), limit);
    // B8: 0 micros of overspend at the pool.
    assert!(
        balances.available.micros() >= 0,
        "pool overspent: {balances:?}"
    );
    assert!(
        balances.spent.micros() + balances.reserved.micros() <= limit,
        "{balances:?}"
    );
    assert_eq!(pool.overrun(), None, "{balances:?}");
    // B8 liveness: work waiting on the pool went ahead whenever other Rooms freed it (each
    // serve's pass resumes it), so what is left cannot hold even the largest call.
    assert!(
        balances.available.micros() < largest,
        "{} micros left in the pool while work waited: {balances:?}",
        balances.available.micros()
    );
    // The pool's log replays to its balances.
    let log = store.pool_log(&pool_id).await.unwrap();
    let entries: Vec<LedgerEntry> = log.iter().map(|row| row.entry.clone()).collect();
    assert_eq!(
        BudgetLedger::replay(&entries).unwrap(),
        pool,
        "the pool's log replays"
    );

    let mut spent = 0;
    let mut reserved = 0;
    let mut refused = 0;
    let mut room_reservations: BTreeMap<OperationId, RoomId> = BTreeMap::new();
    for name in ROOMS {
        let room = store.load(&room_id(name)).await.unwrap().unwrap();
        let own = room.state.ledger().balances();
        // 0 micros of overspend at any Room.
        assert!(own.available.micros() >= 0, "{name} overspent: {own:?}");
        assert_eq!(room.state.ledger().overrun(), None, "{name}");
        spent += own.spent.micros();
        reserved += own.reserved.micros();
        let rows = store.ledger(&room_id(name)).await.unwrap();
        assert_eq!(
            BudgetLedger::replay(&rows).as_ref(),
            Ok(room.state.ledger()),
            "{name}'s ledger replays"
        );
        for row in rows {
            if let LedgerEntry::Reserved { op, .. } = row {
                room_reservations.insert(op, room_id(name));
            }
        }
        let history = store
            .history(&room_id(name), agentroom_ports::Revision(0), 100_000)
            .await
            .unwrap();
        refused += history
            .iter()
            .flat_map(|entry| &entry.log)
            .filter(|l| l.verdict == Verdict::Rejected && l.rule == Some(Rule::B8))
            .count();
    }
    assert!(refused > 0, "the callers never reached the pool's refusal");
    assert_eq!(
        spent,
        balances.spent.micros(),
        "the sum of the Rooms' charges is the pool's spent"
    );
    assert_eq!(reserved, balances.reserved.micros());
    // Every reservation a Room made went through the pool, under that Room.
    let pooled: BTreeMap<OperationId, RoomId> = log
        .iter()
        .filter_map(|row| match (&row.entry, &row.room) {
            (LedgerEntry::Reserved { op, .. }, Some(room)) => Some((*op, room.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(pooled, room_reservations);
    assert!(
        (80..=140).contains(&pooled.len()),
        "the pool should have held about 100 reservations, held {}",
        pooled.len()
    );
    eprintln!(
        "pool race: {} reservations through the pool, {refused} B8 refusals, spent {} of {limit} \
         micros, {} available",
        pooled.len(),
        balances.spent.micros(),
        balances.available.micros()
    );
    // Members with budget.read see the pool's gauge beside their Room's.
    let (status, body) = request(
        &addresses[0],
        "GET",
        "/v1/rooms/north/budget?limit=1",
        &tokens[0],
        None,
    );
    assert_eq!(status, 200, "{body}");
    let budget: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(budget["pool"]["id"], POOL, "{budget}");
    assert_eq!(
        budget["pool"]["balances"]["spent"],
        balances.spent.micros(),
        "{budget}"
    );
    assert_eq!(budget["pool"]["balances"]["limit"], limit, "{budget}");
    let shown = ok(&agentroom(&url, &["pool", "show", "--pool", POOL]));
    assert!(shown.contains("replays to these balances"), "{shown}");
    for name in ROOMS {
        assert!(
            shown.contains(&format!("room      {name} draws on it")),
            "{shown}"
        );
    }
}

fn refused(output: &Output, code: i32, says: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert!(stderr.contains(says), "expected {says:?} in: {stderr}");
}

/// Every bad argument of `agentroom pool` is refused with a clear error, and nothing is
/// written: the pool, its log and the Room are as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b8_bad_pool_commands_are_refused_and_change_nothing() {
    let db = Database::create();
    let url = db.url();
    migrate_up(&url);
    create_room(&url, "north");
    ok(&agentroom(
        &url,
        &["pool", "create", "--pool", POOL, "--limit-micros", "5000"],
    ));
    let store = PgRooms::connect(&url).await.unwrap();
    let pool_id = PoolId::parse(POOL).unwrap();
    let pool_before = store.load_pool(&pool_id).await.unwrap().unwrap();
    let log_before = store.pool_log(&pool_id).await.unwrap();
    let room_before = store.load(&room_id("north")).await.unwrap().unwrap();

    let cases: [(&[&str], i32, &str); 11] = [
        (
            &["pool", "create", "--pool", POOL, "--limit-micros", "9"],
            1,
            "pool campaign exists already",
        ),
        (
            &["pool", "create", "--pool", "other", "--limit-micros=-1"],
            1,
            "cannot be negative",
        ),
        (
            &["pool", "create", "--pool", "Bad Id", "--limit-micros", "1"],
            2,
            "pool id",
        ),
        (
            &[
                "pool",
                "create",
                "--pool",
                "other",
                "--limit-micros",
                "lots",
            ],
            2,
            "--limit-micros",
        ),
        (
            &["pool", "raise", "--pool", POOL, "--by-micros", "0"],
            1,
            "must be positive",
        ),
        (
            &["pool", "raise", "--pool", "nowhere", "--by-micros", "5"],
            1,
            "no pool nowhere",
        ),
        (
            &["pool", "acknowledge", "--pool", POOL],
            1,
            "no overrun to acknowledge",
        ),
        (&["pool", "show", "--pool", "nowhere"], 1, "no pool nowhere"),
        (
            &["pool", "attach", "--pool", "nowhere", "--room", "north"],
            1,
            "no pool nowhere",
        ),
        (
            &["pool", "attach", "--pool", POOL, "--room", "south"],
            1,
            "no room south",
        ),
        (
            &["pool", "detach", "--room", "north"],
            1,
            "draws on no pool",
        ),
    ];
    for (args, code, says) in cases {
        refused(&agentroom(&url, args), code, says);
    }
    assert_eq!(
        store.load_pool(&pool_id).await.unwrap().unwrap(),
        pool_before
    );
    assert_eq!(store.pool_log(&pool_id).await.unwrap(), log_before);
    assert_eq!(store.pools().await.unwrap(), vec![pool_id.clone()]);
    let listed = ok(&agentroom(&url, &["pool", "list"]));
    assert!(listed.starts_with("campaign: limit $0.005000"), "{listed}");
    let room_after = store.load(&room_id("north")).await.unwrap().unwrap();
    // The refused detach was decided (B8, logged) but changed nothing of the Room's pool.
    assert_eq!(room_after.state.pool(), None);
    assert_eq!(room_after.state.ledger(), room_before.state.ledger());
    // Attached twice: the second is refused by the domain (B8), the first stands.
    ok(&agentroom(
        &url,
        &["pool", "attach", "--pool", POOL, "--room", "north"],
    ));
    refused(
        &agentroom(&url, &["pool", "attach", "--pool", POOL, "--room", "north"]),
        1,
        "already draws on pool campaign",
    );
}
