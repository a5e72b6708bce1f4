//! No interrupt moderation (`ethtool -C rx-usecs 0`): every cause interrupts at once.

use super::Moderation;
use crate::engine::time::Span;

pub struct NoThrottle;

impl Moderation for NoThrottle {
    fn interval(&self) -> Span {
        Span::ZERO
    }
    fn name(&self) -> &'static str {
        "off"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::moderation::Episode;
    use crate::engine::time::Instant;

    #[test]
    fn never_throttles_whatever_the_load() {
        let mut m = NoThrottle;
        m.episode_done(
            Instant::from_ps(1),
            &Episode { rx_packets: 1_000_000, rx_bytes: 60_000_000, ..Episode::default() },
        );
        assert_eq!(m.interval(), Span::ZERO);
    }
}
