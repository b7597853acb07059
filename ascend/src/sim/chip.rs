//! The chip the simulator plays (`ASCEND_SIM_CHIP`): which of the reference
//! page's per-product rules apply. Only the inference products need device
//! memory allocated with a P2P policy before another device may import it;
//! the Atlas 200I/500 A2 products have no IPC memory sharing at all.

use core::fmt;

/// The variable that chooses the chip model.
pub const CHIP_ENV: &str = "ASCEND_SIM_CHIP";

/// A chip model of the simulator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Chip {
    /// Atlas inference products (`inference`): cross-device import only of
    /// memory allocated with a P2P policy.
    Inference,
    /// Atlas A2 training/inference products (`A2`, the default).
    A2,
    /// Atlas A3 training/inference products (`A3`): the same IPC rules as A2.
    A3,
    /// Atlas 200I/500 A2 inference products (`200I/500 A2`): no IPC memory
    /// sharing; the IPC calls return 207000.
    Atlas200I500A2,
    /// `ASCEND_SIM_CHIP` holds something else: `aclInit` and the IPC calls fail
    /// with 100000, so a typo never silently tests another chip.
    Unknown,
}

impl Chip {
    /// Every model, for tests that run under each.
    pub const ALL: [Self; 4] = [Self::Inference, Self::A2, Self::A3, Self::Atlas200I500A2];

    /// The model `ASCEND_SIM_CHIP` names (default [`Chip::A2`]).
    pub fn from_env() -> Self {
        match std::env::var(CHIP_ENV) {
            Ok(v) => Self::parse(&v).unwrap_or(Self::Unknown),
            Err(_) => Self::A2,
        }
    }

    /// The model named `name` (the values `ASCEND_SIM_CHIP` takes).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The value of `ASCEND_SIM_CHIP` that selects this model.
    pub fn name(self) -> &'static str {
        match self {
            Self::Inference => "inference",
            Self::A2 => "A2",
            Self::A3 => "A3",
            Self::Atlas200I500A2 => "200I/500 A2",
            Self::Unknown => "unknown",
        }
    }

    /// Whether another device may import only memory allocated with a P2P policy.
    pub fn needs_p2p_policy(self) -> bool {
        self == Self::Inference
    }

    /// Whether the chip has IPC memory sharing.
    pub fn has_ipc(self) -> bool {
        matches!(self, Self::Inference | Self::A2 | Self::A3)
    }
}

impl fmt::Display for Chip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
