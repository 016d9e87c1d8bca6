//! Safe to load: random arguments, well-formed or not, and keys holding what no script
//! wrote, get a reply (a decision or an error), never a crash, and the server keeps serving.
#![allow(clippy::unwrap_used)] // a test that cannot unwrap should fail loudly

mod harness;

use proptest::prelude::*;
use std::cell::RefCell;

/// Keys the arguments name: missing, holding strings no script wrote, or a list.
const KEYS: [&str; 6] = ["fresh", "{k}:8", "{k}:16", "{k}:40", "{k}:garbage", "list"];

/// Numbers around every edge the parser and the algorithms have: signs, fractions,
/// non-numbers, the ends of the exact range, algorithm ids, flags and small limits.
fn number() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::sample::select(vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            2.0,
            3.0,
            4.0,
            5.0,
            6.0,
            32.0,
            33.0,
            1000.0,
            4294967296.0,
            9007199254740991.0,
            9007199254740992.0,
            1e300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ]),
        (0u64..200).prop_map(|n| n as f64),
        (0u64..(1 << 53)).prop_map(|n| n as f64),
        any::<u64>().prop_map(f64::from_bits),
    ]
}

/// A check the parser accepts for `limits` limits (small parameters of any algorithm, some
/// of them policies the core refuses; a lease asked or not), with at most one number
/// replaced by any `number()`.
fn nearly_valid(limits: usize) -> impl Strategy<Value = Vec<f64>> {
    let small = || prop_oneof![Just(0.0), Just(1.0), (0u64..70).prop_map(|n| n as f64)];
    let head = (prop_oneof![Just(-1.0), (0u64..1 << 53).prop_map(|n| n as f64)], small(), small(), 1u64..5);
    let lease = prop::option::of((small(), small()));
    let limit = (1u64..=5, small(), small(), 0u64..2, Just(0.0));
    let limits = prop::collection::vec(limit, limits);
    let mutation = prop::option::of((any::<prop::sample::Index>(), number()));
    (head, lease, limits, mutation).prop_map(|((now, cost, extra, min_ttl), lease, limits, mutation)| {
        let mut numbers = vec![now, cost, extra, min_ttl as f64];
        numbers.extend(lease.map(|(units, period)| [units, period]).into_iter().flatten());
        for (id, p1, p2, p3, p4) in limits {
            numbers.extend([id as f64, p1 + 1.0, p2 + 1.0, p3 as f64, p4]);
        }
        if let Some((index, value)) = mutation {
            let at = index.index(numbers.len());
            numbers[at] = value;
        }
        numbers
    })
}

/// The packed argument for `keys` keys: nearly valid, `4 + 5 L` (or `6 + 5 L`) numbers for
/// any `L`, or any bytes at all.
fn packed(keys: usize) -> impl Strategy<Value = Vec<u8>> {
    let numbers = prop_oneof![
        3 => nearly_valid(keys),
        1 => (0usize..4, 0usize..2).prop_flat_map(|(limits, lease)| prop::collection::vec(number(), 4 + 2 * lease + 5 * limits)),
    ];
    prop_oneof![
        4 => numbers.prop_map(|numbers| numbers.iter().flat_map(|n| n.to_le_bytes()).collect()),
        1 => prop::collection::vec(any::<u8>(), 0..200),
    ]
}

/// The arguments after the command's name.
fn arguments() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let keys = prop::collection::vec(prop::sample::select(KEYS.to_vec()), 0..4);
    let deadline = prop_oneof![
        2 => Just(None),
        2 => number().prop_map(|n| Some(n.to_le_bytes().to_vec())),
        1 => prop::collection::vec(any::<u8>(), 0..12).prop_map(Some),
    ];
    keys.prop_flat_map(move |keys| (Just(keys.clone()), packed(keys.len()), deadline.clone())).prop_map(
        |(keys, packed, deadline)| {
            let mut arguments: Vec<Vec<u8>> = keys.iter().map(|key| key.as_bytes().to_vec()).collect();
            arguments.push(packed);
            arguments.extend(deadline);
            arguments
        },
    )
}

#[test]
fn malformed_arguments_get_error_replies_and_the_server_keeps_serving() {
    let server = harness::start();
    let con = RefCell::new(harness::connect(&server));
    let mut setup = redis::pipe();
    setup.cmd("SET").arg("{k}:8").arg(f64::NAN.to_le_bytes().as_slice());
    setup.cmd("SET").arg("{k}:16").arg([0xff_u8; 16].as_slice()).cmd("SET").arg("{k}:40").arg([0u8; 40].as_slice());
    setup.cmd("SET").arg("{k}:garbage").arg("not a state").cmd("RPUSH").arg("list").arg("x");
    let () = setup.query(&mut *con.borrow_mut()).unwrap();
    let decided = std::cell::Cell::new(0);
    proptest!(ProptestConfig::with_cases(3000), |(arguments in arguments())| {
        let mut con = con.borrow_mut();
        let reply: redis::RedisResult<redis::Value> = redis::cmd("SLUICE.CHECK").arg(&arguments).query(&mut *con);
        match reply {
            Ok(redis::Value::BulkString(_)) => decided.set(decided.get() + 1),
            Ok(other) => prop_assert!(false, "not a packed reply: {:?}", other),
            Err(error) => {
                prop_assert!(error.code().is_some(), "not an error reply: {}", error);
                prop_assert!(!error.to_string().contains("internal error"), "a panic: {}", error);
            }
        }
        // Redis asks the command for its keys with the same arguments (Cluster, ACL).
        let keys: redis::RedisResult<redis::Value> =
            redis::cmd("COMMAND").arg("GETKEYS").arg("SLUICE.CHECK").arg(&arguments).query(&mut *con);
        prop_assert!(keys.is_ok() || keys.unwrap_err().code().is_some());
    });
    // The generator must also reach the algorithms, not only the parser.
    assert!(decided.get() > 30, "only {} of 3000 random checks were decided", decided.get());
    let pong: String = redis::cmd("PING").query(&mut *con.borrow_mut()).unwrap();
    assert_eq!(pong, "PONG");
    assert!(!server.log().contains("panicked"), "the module panicked:\n{}", server.log());
}

/// A give-back the parser accepts for `limits` limits (receipts of any size, small
/// parameters of any algorithm), with at most one number replaced by any `number()`; or
/// `5 + 7 L` numbers for any `L`, or any bytes at all.
fn give_back_packed(limits: usize) -> impl Strategy<Value = Vec<u8>> {
    let small = || prop_oneof![Just(0.0), Just(1.0), (0u64..70).prop_map(|n| n as f64)];
    let head = (prop_oneof![Just(-1.0), (0u64..1 << 53).prop_map(|n| n as f64)], small(), small(), small(), 1u64..5);
    let limit = ((0u64..1 << 53).prop_map(|n| n as f64), small(), 1u64..=5, small(), small(), 0u64..2);
    let mutation = prop::option::of((any::<prop::sample::Index>(), number()));
    let nearly = (head, prop::collection::vec(limit, limits), mutation).prop_map(|(head, limits, mutation)| {
        let (now, leased, unspent, extra, min_ttl) = head;
        let mut numbers = vec![now, leased, unspent, extra, min_ttl as f64];
        for (debited_in, stamp, id, p1, p2, p3) in limits {
            numbers.extend([debited_in, stamp, id as f64, p1 + 1.0, p2 + 1.0, p3 as f64, 0.0]);
        }
        if let Some((index, value)) = mutation {
            let at = index.index(numbers.len());
            numbers[at] = value;
        }
        numbers
    });
    let numbers = prop_oneof![
        3 => nearly,
        1 => (0usize..4).prop_flat_map(|limits| prop::collection::vec(number(), 5 + 7 * limits)),
    ];
    prop_oneof![
        4 => numbers.prop_map(|numbers| numbers.iter().flat_map(|n| n.to_le_bytes()).collect()),
        1 => prop::collection::vec(any::<u8>(), 0..200),
    ]
}

#[test]
fn malformed_give_backs_get_error_replies_and_the_server_keeps_serving() {
    let server = harness::start();
    let con = RefCell::new(harness::connect(&server));
    let mut setup = redis::pipe();
    setup.cmd("SET").arg("{k}:8").arg(f64::NAN.to_le_bytes().as_slice());
    setup.cmd("SET").arg("{k}:16").arg([0xff_u8; 16].as_slice()).cmd("SET").arg("{k}:40").arg([0u8; 40].as_slice());
    setup.cmd("SET").arg("{k}:garbage").arg("not a state").cmd("RPUSH").arg("list").arg("x");
    let () = setup.query(&mut *con.borrow_mut()).unwrap();
    let given = std::cell::Cell::new(0);
    let keys = prop::collection::vec(prop::sample::select(KEYS.to_vec()), 0..4);
    let arguments = keys.prop_flat_map(|keys| (Just(keys.clone()), give_back_packed(keys.len())));
    proptest!(ProptestConfig::with_cases(2000), |((keys, packed) in arguments)| {
        let mut con = con.borrow_mut();
        let reply: redis::RedisResult<redis::Value> = redis::cmd("SLUICE.GIVEBACK").arg(&keys).arg(&packed).query(&mut *con);
        match reply {
            Ok(redis::Value::BulkString(_)) => given.set(given.get() + 1),
            Ok(other) => prop_assert!(false, "not the give-back's reply: {:?}", other),
            Err(error) => {
                prop_assert!(error.code().is_some(), "not an error reply: {}", error);
                prop_assert!(!error.to_string().contains("internal error"), "a panic: {}", error);
            }
        }
        let positions: redis::RedisResult<redis::Value> =
            redis::cmd("COMMAND").arg("GETKEYS").arg("SLUICE.GIVEBACK").arg(&keys).arg(&packed).query(&mut *con);
        prop_assert!(positions.is_ok() || positions.unwrap_err().code().is_some());
    });
    assert!(given.get() > 30, "only {} of 2000 random give-backs were taken", given.get());
    let pong: String = redis::cmd("PING").query(&mut *con.borrow_mut()).unwrap();
    assert_eq!(pong, "PONG");
    assert!(!server.log().contains("panicked"), "the module panicked:\n{}", server.log());
}

#[test]
fn a_key_of_another_type_is_a_wrongtype_error_and_is_left_alone() {
    let server = harness::start();
    let mut con = harness::connect(&server);
    let () = redis::cmd("RPUSH").arg("list").arg("x").query(&mut con).unwrap();
    let limits = [sluice_core::Limit::new(
        "p",
        sluice_core::LeakyBucket::new(std::time::Duration::from_secs(1), 1, sluice_core::LeakMode::NoDelay).unwrap(),
    )];
    let packed = harness::packed(&limits, None, 1, 0, 1);
    let reply: redis::RedisResult<Vec<u8>> = redis::cmd("SLUICE.CHECK").arg("list").arg(&packed).query(&mut con);
    assert_eq!(reply.unwrap_err().code(), Some("WRONGTYPE"));
    let list: Vec<String> = redis::cmd("LRANGE").arg("list").arg(0).arg(-1).query(&mut con).unwrap();
    assert_eq!(list, ["x"]);
}

#[test]
fn the_command_reports_its_keys_for_cluster_routing() {
    let server = harness::start();
    let mut con = harness::connect(&server);
    let limits: Vec<sluice_core::Limit> = (0..2)
        .map(|i| {
            sluice_core::Limit::new(
                format!("p{i}"),
                sluice_core::LeakyBucket::new(std::time::Duration::from_secs(1), 1, sluice_core::LeakMode::NoDelay)
                    .unwrap(),
            )
        })
        .collect();
    let packed = harness::packed(&limits, None, 1, 0, 1);
    for deadline in [None, Some(1e15f64.to_le_bytes().to_vec())] {
        let keys: Vec<String> = redis::cmd("COMMAND")
            .arg("GETKEYS")
            .arg("SLUICE.CHECK")
            .arg("{a}:1")
            .arg("{a}:2")
            .arg(&packed)
            .arg(deadline)
            .query(&mut con)
            .unwrap();
        assert_eq!(keys, ["{a}:1", "{a}:2"]);
    }
}
