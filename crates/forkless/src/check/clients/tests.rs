use super::server::{Answer, Seen};
use super::{Printed, Verdict, judge};

fn seen(calls: usize, cursors: &[&str]) -> Seen {
    Seen { calls, cursors: cursors.iter().map(|c| (*c).to_owned()).collect(), ..Seen::default() }
}

fn printed(numbers: &[u64], result: bool, error: Option<&str>) -> Printed {
    Printed { numbers: numbers.to_vec(), result, error: error.map(str::to_owned), ..Printed::default() }
}

#[test]
fn a_whole_continuation_passes_and_every_fork_shape_fails() {
    let all: Vec<u64> = (1..=8).collect();
    let v = |answer, seen, printed| judge(answer, &seen, &printed).verdict;
    assert_eq!(v(Answer::Continuation, seen(1, &["s1.3"]), printed(&all, true, None)), Verdict::Pass);
    // The negative controls: what a client taking a fork prints.
    let forked = [1, 2, 3, 1, 2, 3, 4, 5, 6, 7, 8];
    assert_eq!(v(Answer::NewStream, seen(1, &["s1.3"]), printed(&forked, true, None)), Verdict::Fail);
    assert_eq!(
        v(Answer::SkipOne, seen(1, &["s1.3"]), printed(&[1, 2, 3, 5, 6, 7, 8], true, None)),
        Verdict::Fail
    );
    // A duplicate side effect, a silent end, a result without the events before it.
    assert_eq!(v(Answer::Gone, seen(2, &["s1.3"]), printed(&[1, 2, 3], true, None)), Verdict::Fail);
    assert_eq!(v(Answer::Continuation, seen(1, &[]), printed(&[1, 2, 3], false, None)), Verdict::Fail);
    assert_eq!(v(Answer::Gone, seen(1, &["s1.3"]), printed(&[1, 2], true, None)), Verdict::Fail);
    // Refusals pass; a client that never resumes is unsupported.
    assert_eq!(
        v(Answer::NewStream, seen(1, &["s1.3"]), printed(&[1, 2, 3], false, Some("unproven"))),
        Verdict::Pass
    );
    assert_eq!(v(Answer::Gone, seen(1, &["s1.3"]), printed(&[1, 2, 3], false, Some("gone"))), Verdict::Pass);
    assert_eq!(
        v(Answer::SkipOne, seen(1, &[]), printed(&[1, 2, 3], false, Some("cut"))),
        Verdict::Unsupported
    );
}

#[test]
fn the_driver_protocol_is_read_line_by_line() {
    let mut p = Printed::default();
    p.take(r##"{"notification":"notifications/message","params":{"level":"info","data":"#1"}}"##);
    p.take(r#"{"notification":"notifications/progress","params":{}}"#);
    p.take("not json");
    p.take(r#"{"result":{"content":[],"isError":true}}"#);
    assert_eq!(p.numbers, [1]);
    assert!(!p.result && p.error.is_some(), "an isError result is an error");
    assert_eq!(p.other.len(), 2);
}
