//! `decide_get` allocates nothing, on any row.

use super::*;

// ===== decide_get allocates nothing =====

#[test]
fn decide_get_allocates_nothing_on_any_row() {
    // The counter is per thread, so parallel tests cannot pollute this measurement; prove it
    // is installed first so the zero below cannot pass vacuously.
    let probe = allocation_counter::measure(|| {
        std::hint::black_box(Vec::<u8>::with_capacity(8));
    });
    assert_eq!(probe.count_total, 1, "the counting allocator is active");

    let fresh = session(40, true);
    let (seen_contract, s_contract) = seen_and_dropped(41, true, 3);
    let (seen_no_contract, s_plain) = seen_and_dropped(42, false, 41);
    let mut live = session(43, true);
    let live_grant = attach_standalone(&mut live);
    emit(&mut live, AppendTarget::Standalone, 2);
    let (_, reset_done, _) = ask(&seen_contract, None, None, T0, &cfg());
    let mut evicted = session(44, true);
    emit_with(
        &mut evicted,
        AppendTarget::Standalone,
        5,
        &Limits { stream_max_events: 2, ..Limits::default() },
    );
    let mut completed = session(45, false);
    let req = open_request(&mut completed, 450);
    completed.append(AppendTarget::Stream(req.stream), 1, EventKind::Final, T0, &Limits::default()).unwrap();
    let (_, foreign) = seen_and_dropped(46, true, 1);

    // Every header string is built before measuring.
    let s41 = format!("{s_plain}.41");
    let s3 = format!("{s_contract}.3");
    let ahead = format!("{s_plain}.42");
    let foreign_lei = format!("{foreign}.1");
    let evicted_lei = format!("{}.1", evicted.standalone().id());
    let completed_lei = format!("{}.0", req.stream);
    let live_lei = format!("{}.1", live_grant.stream);
    let plain_token = s_plain.to_string();
    let contract_token = s_contract.to_string();
    let live_token = live_grant.stream.to_string();
    let strict = strict();
    let compat = cfg();

    type Case<'a> = (&'a SessionRecord, Option<&'a str>, Option<&'a str>, &'a Config, Decision);
    let cases: Vec<Case<'_>> = vec![
        (&fresh, None, None, &compat, Decision::OpenNew(OpenNew::Standalone(fresh.standalone().id()))),
        (&evicted, None, None, &compat, Decision::Reject(RejectReason::CursorEvicted)),
        (&live, None, None, &compat, Decision::Conflict(ConflictReason::StreamAttached)),
        (&seen_contract, None, None, &compat, Decision::OpenNew(OpenNew::Reset(s_contract))),
        (&seen_no_contract, None, None, &compat, Decision::Reject(RejectReason::CursorMissing)),
        (&live, None, Some(&live_token), &compat, Decision::Reject(RejectReason::CursorMissing)),
        (&seen_no_contract, Some("41"), None, &compat, Decision::Reject(RejectReason::CursorMalformed)),
        (&seen_no_contract, Some(&foreign_lei), None, &compat, Decision::Reject(RejectReason::StreamUnknown)),
        (
            &seen_no_contract,
            Some(&s41),
            Some(&contract_token),
            &compat,
            Decision::Reject(RejectReason::TokenMismatch),
        ),
        (&seen_no_contract, Some(&s41), None, &strict, Decision::Reject(RejectReason::TokenMissing)),
        (&reset_done, Some(&s3), None, &compat, Decision::Reject(RejectReason::StreamFenced)),
        (&seen_no_contract, Some(&ahead), None, &compat, Decision::Reject(RejectReason::CursorAhead)),
        (&evicted, Some(&evicted_lei), None, &compat, Decision::Reject(RejectReason::CursorEvicted)),
        (
            &seen_no_contract,
            Some(&s41),
            Some(&plain_token),
            &strict,
            Decision::Resume { stream: s_plain, after: Seq::new(41) },
        ),
        (
            &live,
            Some(&live_lei),
            None,
            &compat,
            Decision::Resume { stream: live_grant.stream, after: Seq::FIRST },
        ),
        (
            &completed,
            Some(&completed_lei),
            None,
            &compat,
            Decision::Resume { stream: req.stream, after: Seq::PRIMING },
        ),
    ];
    // Every reject reason and every kind of decision is exercised.
    for reason in RejectReason::ALL {
        assert!(cases.iter().any(|c| c.4 == Decision::Reject(reason)), "no case for {reason:?}");
    }

    const ROUNDS: usize = 500;
    let mut mismatches = 0usize;
    let info = allocation_counter::measure(|| {
        for _ in 0..ROUNDS {
            for (record, lei, token, cfg, want) in &cases {
                let req = GetRequest { last_event_id: *lei, stream_token: *token };
                let got = decide_get(std::hint::black_box(record), std::hint::black_box(&req), T0, cfg);
                mismatches += usize::from(got != *want);
            }
        }
    });
    assert_eq!(mismatches, 0, "every case decides as expected");
    assert_eq!(
        info.count_total,
        0,
        "decide_get allocated across {} decisions: {info:?}",
        ROUNDS * cases.len()
    );
    assert_eq!(info.bytes_total, 0);
}
