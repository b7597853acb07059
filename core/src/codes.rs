//! Codes of the enums that travel in shared memory and on the wire.

/// Implements `code()` and `from_code()` for a fieldless enum from one
/// table, so that the two directions cannot disagree:
///
/// ```
/// #[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// pub enum Color { Red, Green }
/// kpccl_core::codes!(Color: u32 { Red = 1, Green = 2 });
/// assert_eq!(Color::from_code(Color::Green.code()), Some(Color::Green));
/// assert_eq!(Color::from_code(0), None);
/// ```
#[macro_export]
macro_rules! codes {
    ($ty:ident: $int:ty { $($variant:ident = $code:literal),+ $(,)? }) => {
        impl $ty {
            /// The code carried in shared memory and on the wire.
            #[must_use]
            pub const fn code(self) -> $int {
                match self {
                    $(Self::$variant => $code,)+
                }
            }

            /// The value with this code, if any.
            #[must_use]
            pub const fn from_code(code: $int) -> Option<Self> {
                match code {
                    $($code => Some(Self::$variant),)+
                    _ => None,
                }
            }
        }
    };
}
