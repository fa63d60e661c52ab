//! Sealing and opening `requestState`: each refusal with its reason, key rotation, single use.

use super::*;

const NOW: Timestamp = Timestamp::from_millis(1_000_000);

fn states(keys: RequestStateKeys) -> RequestStates {
    RequestStates::new(&RequestStateConfig { keys, ttl: Duration::from_secs(60) })
}

const ALICE_CALLS_T: Binding<'static> =
    Binding { principal: Some("alice"), method: "tools/call", name: Some("t") };

const RING: &str = "# current first\nnew:0101010101010101010101010101010101010101010101010101010101010101\n\nold:0202020202020202020202020202020202020202020202020202020202020202\n";

fn state_of(opened: Result<Opened, Refused>) -> Result<Value, Refused> {
    opened.map(|o| o.state)
}

#[test]
fn a_state_opens_for_its_binding_with_its_one_time_key() {
    let s = states(RequestStateKeys::generate());
    let sealed = s.seal(&json!({ "step": 1 }), &Map::new(), &ALICE_CALLS_T, NOW);
    assert!(sealed.starts_with("fks1.local."), "{sealed}");
    assert!(!sealed.contains("step"), "the state is encrypted: {sealed}");
    let opened = s.open(&sealed, &ALICE_CALLS_T, NOW).expect("opens");
    assert_eq!((opened.state.clone(), opened.issued), (json!({ "step": 1 }), NOW));
    assert_eq!(opened.until, NOW.saturating_add(Duration::from_secs(60)));
    // Opening again names the same key (the store refuses its second spend); another seal
    // of the same state has another.
    assert_eq!(s.open(&sealed, &ALICE_CALLS_T, NOW).expect("opens").key, opened.key);
    let again = s.seal(&json!({ "step": 1 }), &Map::new(), &ALICE_CALLS_T, NOW);
    assert_ne!(s.open(&again, &ALICE_CALLS_T, NOW).expect("opens").key, opened.key);
}

#[test]
fn each_refusal_names_its_reason() {
    let s = states(RequestStateKeys::generate());
    let seal = || s.seal(&json!({}), &Map::new(), &ALICE_CALLS_T, NOW);
    let bob = Binding { principal: Some("bob"), ..ALICE_CALLS_T };
    let anonymous = Binding { principal: None, ..ALICE_CALLS_T };
    let other_tool = Binding { name: Some("u"), ..ALICE_CALLS_T };
    let prompt = Binding { method: "prompts/get", ..ALICE_CALLS_T };
    for (who, reason) in [
        (&bob, Refused::OtherPrincipal),
        (&anonymous, Refused::OtherPrincipal),
        (&other_tool, Refused::OtherRequest),
        (&prompt, Refused::OtherRequest),
    ] {
        assert_eq!(state_of(s.open(&seal(), who, NOW)), Err(reason), "{who:?}");
    }
    let late = NOW.saturating_add(Duration::from_secs(60));
    assert_eq!(state_of(s.open(&seal(), &ALICE_CALLS_T, late)), Err(Refused::Expired));
    let sealed = seal();
    let (head, body) = sealed.rsplit_once('.').expect("three parts");
    let mut bytes = URL_SAFE_NO_PAD.decode(body).expect("base64url");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let flipped = format!("{head}.{}", URL_SAFE_NO_PAD.encode(&bytes));
    assert_eq!(state_of(s.open(&flipped, &ALICE_CALLS_T, NOW)), Err(Refused::Tampered));
    assert_eq!(state_of(s.open(&format!("{sealed}!"), &ALICE_CALLS_T, NOW)), Err(Refused::Malformed));
    // The conformance suite's tampering: base64url characters appended, so the text may still
    // decode (then the tag fails) or not (then it is malformed); refused either way.
    let suffixed = state_of(s.open(&format!("{sealed}-TAMPERED"), &ALICE_CALLS_T, NOW));
    assert!(matches!(suffixed, Err(Refused::Tampered | Refused::Malformed)), "{suffixed:?}");
    let unknown = s.open(&sealed.replacen(".local.", ".gone.", 1), &ALICE_CALLS_T, NOW);
    assert_eq!(state_of(unknown), Err(Refused::UnknownKey));
    assert_eq!(state_of(s.open("nonsense", &ALICE_CALLS_T, NOW)), Err(Refused::Malformed));
    // Another process's key (the default ring is per process) never opens it.
    let elsewhere = states(RequestStateKeys::generate());
    assert_eq!(state_of(elsewhere.open(&seal(), &ALICE_CALLS_T, NOW)), Err(Refused::Tampered));
    let rpc = Refused::Replayed.to_rpc();
    assert_eq!((rpc.code, rpc.data), (-32602, Some(json!({ "reason": "replayed" }))));
}

#[test]
fn a_shared_ring_opens_on_another_node_and_a_rotated_key_still_opens() {
    let old = "old:0202020202020202020202020202020202020202020202020202020202020202";
    let before_rotation =
        states(RequestStateKeys::parse(old).expect("ring")).seal(&json!(1), &Map::new(), &ALICE_CALLS_T, NOW);
    let ring = RequestStateKeys::parse(RING).expect("ring");
    let (a, b) = (states(ring.clone()), states(ring));
    let answers: Map<String, Value> =
        [("name".to_owned(), json!({ "action": "accept" }))].into_iter().collect();
    let sealed = a.seal(&json!(2), &answers, &ALICE_CALLS_T, NOW);
    assert!(sealed.starts_with("fks1.new."), "the first key seals: {sealed}");
    let opened = b.open(&sealed, &ALICE_CALLS_T, NOW).expect("opens on b");
    assert_eq!((opened.state, opened.answers), (json!(2), answers), "the state and the gathered answers");
    assert_eq!(state_of(b.open(&before_rotation, &ALICE_CALLS_T, NOW)), Ok(json!(1)));
}

#[test]
fn a_bad_ring_is_refused_with_its_line() {
    assert_eq!(RequestStateKeys::parse("# nothing\n").err(), Some(KeyRingError::Empty));
    assert_eq!(RequestStateKeys::parse("k:12").err(), Some(KeyRingError::Line(1)));
    assert_eq!(
        RequestStateKeys::parse(&format!("bad id:{}", "00".repeat(32))).err(),
        Some(KeyRingError::Line(1))
    );
    let twice = format!("k:{0}\nk:{0}", "00".repeat(32));
    assert_eq!(RequestStateKeys::parse(&twice).err(), Some(KeyRingError::Duplicate(2, "k".into())));
    let ring = RequestStateKeys::parse(RING).expect("ring");
    assert!(!format!("{ring:?}").contains("0101"), "keys stay out of Debug: {ring:?}");
}
