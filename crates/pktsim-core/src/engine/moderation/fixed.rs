//! Static interrupt moderation (`ethtool -C rx-usecs N`): a fixed throttle interval, which
//! an ixgbe NIC keeps in its EITR register in 2.048 us steps.

use super::Moderation;
use crate::engine::time::Span;

/// EITR register value (`usecs << 2`, bits 11:3 used) to an interval: one unit of the
/// bits-11:3 field is 2.048 us.
pub fn eitr_interval(itr_reg: u32) -> Span {
    Span::from_ps(((itr_reg & 0x0FF8) >> 3) as u64 * 2_048_000)
}

pub struct Fixed {
    interval: Span,
}

impl Fixed {
    /// From `rx-usecs` (whole microseconds): the NIC uses 2.048 * floor(N / 2) us.
    pub fn from_usecs(usecs: u32) -> Self {
        Fixed { interval: eitr_interval(usecs << 2) }
    }
}

impl Moderation for Fixed {
    fn interval(&self) -> Span {
        self.interval
    }
    fn name(&self) -> &'static str {
        "static"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eitr_granularity_is_2_048_us() {
        assert_eq!(eitr_interval(40), Span::from_ps(10_240_000));
        assert_eq!(eitr_interval(200), Span::from_ps(51_200_000));
        assert_eq!(eitr_interval(500), Span::from_ps(126_976_000)); // 500 & 0xFF8 = 496
        assert_eq!(Fixed::from_usecs(50).interval(), Span::from_ps(51_200_000));
        assert_eq!(Fixed::from_usecs(51).interval(), Span::from_ps(51_200_000));
        assert_eq!(Fixed::from_usecs(1).interval(), Span::ZERO);
    }
}
