//! Declaring a table's columns once: the macros `table!` and `columns!`.
//!
//! A table lists its columns, in order, each with its name, the Arrow
//! builder that makes it (which gives its type: [`ColumnBuilder`]), whether
//! it can be null, and a one-line description. From that one list the
//! macros make the struct holding one builder per column, the column
//! fields, the arrays taken from the builders and the list of the columns
//! and their descriptions ([`ColumnDoc`]), which a test checks docs/SQL.md
//! against. What is left to write by hand is what a table does with the
//! events: [`super::Table`].
//!
//! ```text
//! table! {
//!     /// Builds `wakeups`.
//!     pub struct Wakeups as "wakeups" {
//!         /// Time, ns.
//!         ts: UInt64Builder,
//!         /// CPU the wake-up was written on.
//!         cpu: UInt32Builder,
//!         /// The thread that woke it, when written.
//!         waker_tid: UInt64Builder nullable,
//!     }
//! }
//! ```
//!
//! declares the table `wakeups`, whose columns after `trace_id` and `host`
//! are `ts` (`UInt64`), `cpu` (`UInt32`) and `waker_tid` (`UInt64`, the
//! only one that can be null). A table's `state { ... }` holds what it keeps
//! besides its columns; a field marked `flatten` is a group of columns
//! several tables share, declared with `columns!`
//! ([`super::track::TrackColumns`]).

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, ArrowPrimitiveType, BooleanBuilder, PrimitiveBuilder, StringBuilder,
};
use datafusion::arrow::datatypes::DataType;

/// A column's name and its one-line description, as declared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnDoc {
    /// The column's name.
    pub name: &'static str,
    /// What it holds, in one line.
    pub doc: &'static str,
}

/// The builder of one column's arrays.
pub trait ColumnBuilder: Default {
    /// The column's type.
    fn data_type() -> DataType;
    /// The values appended since the last call, as an array of
    /// [`ColumnBuilder::data_type`]; the builder is empty after.
    fn finish_array(&mut self) -> ArrayRef;
}

impl<T: ArrowPrimitiveType> ColumnBuilder for PrimitiveBuilder<T> {
    fn data_type() -> DataType {
        T::DATA_TYPE
    }

    fn finish_array(&mut self) -> ArrayRef {
        Arc::new(self.finish())
    }
}

impl ColumnBuilder for StringBuilder {
    fn data_type() -> DataType {
        DataType::Utf8
    }

    fn finish_array(&mut self) -> ArrayRef {
        Arc::new(self.finish())
    }
}

impl ColumnBuilder for BooleanBuilder {
    fn data_type() -> DataType {
        DataType::Boolean
    }

    fn finish_array(&mut self) -> ArrayRef {
        Arc::new(self.finish())
    }
}

/// How many columns `parts` hold in all: the length of [`concat`]'s list.
pub(crate) const fn count(parts: &[&[ColumnDoc]]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < parts.len() {
        n += parts[i].len();
        i += 1;
    }
    n
}

/// The columns of `parts`, one after the other (`N` is [`count`] of
/// `parts`): the list of a struct's columns, made at compile time from its
/// own columns and those of the groups it flattens.
pub(crate) const fn concat<const N: usize>(parts: &[&[ColumnDoc]]) -> [ColumnDoc; N] {
    let mut out = [ColumnDoc { name: "", doc: "" }; N];
    let mut n = 0;
    let mut i = 0;
    while i < parts.len() {
        let mut j = 0;
        while j < parts[i].len() {
            out[n] = parts[i][j];
            n += 1;
            j += 1;
        }
        i += 1;
    }
    assert!(n == N, "N is not the number of columns");
    out
}

/// Declares a group of columns that tables share: a struct of one builder
/// per column, with the same column syntax as [`table!`].
///
/// ```text
/// columns! {
///     /// Builders of the track, category and name columns.
///     pub struct TrackColumns {
///         /// Process.
///         pid: UInt64Builder,
///         /// Its name, if it has one.
///         name: StringBuilder nullable,
///     }
/// }
/// ```
///
/// makes the struct (`Default`), and in an `impl` of it `COLUMNS` (the
/// columns and their descriptions, [`ColumnDoc`]), `fields()` (their Arrow
/// fields) and `finish(&mut self)` (their arrays, the builders emptied), all
/// in the order declared. A table takes in the group's columns, where they
/// come in its own, with `flatten`.
macro_rules! columns {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                #[doc = $doc:literal]
                $col:ident : $builder:ident $($flag:ident)?
            ),* $(,)?
        }
    ) => {
        $crate::tables::declare::columns! {
            @struct [$(#[$meta])*] $vis $name
            [$( #[doc = $doc] $col : $builder $($flag)? ),*]
            []
        }
    };

    // The struct, with the columns' builders then the other fields.
    (
        @struct [$(#[$meta:meta])*] $vis:vis $name:ident
        [$( #[doc = $doc:literal] $col:ident : $builder:ident $($flag:ident)? ),*]
        [$( $(#[$smeta:meta])* $state:ident : $sty:ty ),*]
    ) => {
        $(#[$meta])*
        #[derive(Default)]
        $vis struct $name {
            $(
                #[doc = $doc]
                $col: $builder,
            )*
            $(
                $(#[$smeta])*
                $state: $sty,
            )*
        }

        impl $name {
            /// The columns, in order, with their descriptions.
            pub const COLUMNS: &'static [$crate::tables::declare::ColumnDoc] = {
                const PARTS: &[&[$crate::tables::declare::ColumnDoc]] = &[
                    $( $crate::tables::declare::columns!(@doc $col $doc $builder $($flag)?) ),*
                ];
                &$crate::tables::declare::concat::<
                    { $crate::tables::declare::count(PARTS) }
                >(PARTS)
            };

            /// The columns' fields, in order.
            pub fn fields() -> ::std::vec::Vec<$crate::datafusion::arrow::datatypes::Field> {
                [$( $crate::tables::declare::columns!(@fields $col $builder $($flag)?) ),*]
                    .into_iter()
                    .flatten()
                    .collect()
            }

            /// The columns' arrays, in order; the builders are empty after.
            pub fn finish(&mut self) -> ::std::vec::Vec<$crate::datafusion::arrow::array::ArrayRef> {
                [$( $crate::tables::declare::columns!(@finish self.$col $(, $flag)?) ),*]
                    .into_iter()
                    .flatten()
                    .collect()
            }
        }
    };

    // One column's entries in `COLUMNS`.
    (@doc $col:ident $doc:literal $builder:ident) => {
        &[$crate::tables::declare::ColumnDoc {
            name: stringify!($col),
            doc: $doc.trim_ascii(),
        }]
    };
    (@doc $col:ident $doc:literal $builder:ident nullable) => {
        $crate::tables::declare::columns!(@doc $col $doc $builder)
    };
    (@doc $col:ident $doc:literal $builder:ident flatten) => {
        $builder::COLUMNS
    };

    // One column's fields: one, or a group's.
    (@fields $col:ident $builder:ident) => {
        $crate::tables::declare::columns!(@fields $col $builder [false])
    };
    (@fields $col:ident $builder:ident nullable) => {
        $crate::tables::declare::columns!(@fields $col $builder [true])
    };
    (@fields $col:ident $builder:ident [$nullable:literal]) => {
        ::std::vec![$crate::datafusion::arrow::datatypes::Field::new(
            stringify!($col),
            <$builder as $crate::tables::declare::ColumnBuilder>::data_type(),
            $nullable,
        )]
    };
    (@fields $col:ident $builder:ident flatten) => {
        $builder::fields()
    };

    // One column's arrays: one, or a group's.
    (@finish $builder:expr) => {
        ::std::vec![$crate::tables::declare::ColumnBuilder::finish_array(&mut $builder)]
    };
    (@finish $builder:expr, nullable) => {
        $crate::tables::declare::columns!(@finish $builder)
    };
    (@finish $builder:expr, flatten) => {
        $builder.finish()
    };
}

/// Declares a table: its struct, its SQL name, and its columns in order,
/// each once.
///
/// ```text
/// table! {
///     /// Builds `wakeups`.
///     pub struct Wakeups as "wakeups" {
///         /// Time, ns.
///         ts: UInt64Builder,
///         /// The thread that woke it, when known.
///         waker_tid: UInt64Builder nullable,
///         /// Where and what the event is: `pid`, `tid`, ... `name`.
///         track: TrackColumns flatten,
///     }
///     state {
///         /// Text a row's arguments are written into.
///         scratch: String,
///     }
/// }
/// ```
///
/// Each column is one line of description (a single `///` line: it is
/// the column's entry in `COLUMNS`), then `name: Builder`, the field
/// holding its builder; the builder's [`ColumnBuilder`] gives the column's
/// Arrow type. A column is not null unless marked `nullable`. A field
/// marked `flatten` is a group of columns declared with [`columns!`],
/// whose columns come there, in their order.
///
/// The optional `state` holds what the table keeps besides its columns
/// (a scratch buffer, the flags of [`super::Table::keep_columns`], what it
/// gathers until [`super::Table::end`]); every field must be `Default`.
///
/// The macro makes the struct (`Default`) with the builders, the state and
/// `rows: usize`, which the table's [`super::Table::event`] and
/// [`super::Table::end`] count the rows they add in; what [`columns!`]
/// makes (`COLUMNS`, `fields()`, `finish()`); and the table's
/// [`super::Columns`]: its name, columns, column descriptions, rows and
/// arrays. The table's [`super::Table`] is written by hand.
macro_rules! table {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident as $sql:literal {
            $(
                #[doc = $doc:literal]
                $col:ident : $builder:ident $($flag:ident)?
            ),* $(,)?
        }
        $(
            state {
                $( $(#[$smeta:meta])* $state:ident : $sty:ty ),* $(,)?
            }
        )?
    ) => {
        $crate::tables::declare::columns! {
            @struct [$(#[$meta])*] $vis $name
            [$( #[doc = $doc] $col : $builder $($flag)? ),*]
            [
                /// Rows held.
                rows: usize
                $($(, $(#[$smeta])* $state : $sty)*)?
            ]
        }

        impl $crate::tables::Columns for $name {
            fn name(&self) -> &'static str {
                $sql
            }

            fn columns(&self) -> ::std::vec::Vec<$crate::datafusion::arrow::datatypes::Field> {
                Self::fields()
            }

            fn column_docs(&self) -> &'static [$crate::tables::declare::ColumnDoc] {
                Self::COLUMNS
            }

            fn rows(&self) -> usize {
                self.rows
            }

            fn take(&mut self) -> ::std::vec::Vec<$crate::datafusion::arrow::array::ArrayRef> {
                self.rows = 0;
                self.finish()
            }
        }
    };
}

pub(crate) use {columns, table};
