//! Unit tests of `chaos`.

use super::*;

#[test]
fn durations_parse_with_units() {
    assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
    assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
    assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    assert_eq!(parse_duration("4"), Ok(Duration::from_secs(4)));
    assert!(parse_duration("0s").is_err());
    assert!(parse_duration("3h").is_err());
}

#[test]
fn percentiles_use_the_nearest_rank() {
    let mut samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
    let p = percentiles(&mut samples);
    assert!((p.p50 - 50.0).abs() < 1e-9 && (p.p99 - 99.0).abs() < 1e-9 && (p.max - 100.0).abs() < 1e-9);
    assert_eq!(percentiles(&mut []).count, 0);
}
