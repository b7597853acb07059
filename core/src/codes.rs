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
///
/// With `else Variant`, a variant that carries the code keeps the codes the
/// table does not know (a newer peer's), and `from_code()` is total:
///
/// ```
/// #[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// pub enum Shape { Round, Square, Unknown(u8) }
/// kpccl_core::codes!(Shape: u8 { Round = 1, Square = 2 } else Unknown);
/// assert_eq!(Shape::from_code(Shape::Square.code()), Shape::Square);
/// assert_eq!(Shape::from_code(9), Shape::Unknown(9));
/// assert_eq!(Shape::Unknown(9).code(), 9);
/// ```
#[macro_export]
macro_rules! codes {
    ($ty:ident: $int:ty { $($variant:ident = $code:literal),+ $(,)? } else $other:ident) => {
        impl $ty {
            /// The code carried in shared memory and on the wire.
            #[must_use]
            pub const fn code(self) -> $int {
                match self {
                    $(Self::$variant => $code,)+
                    Self::$other(code) => code,
                }
            }

            /// The value with this code (an unknown code is kept as it is).
            #[must_use]
            pub const fn from_code(code: $int) -> Self {
                match code {
                    $($code => Self::$variant,)+
                    other => Self::$other(other),
                }
            }
        }
    };
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
