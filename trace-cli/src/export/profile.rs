//! The messages of pprof's `profile.proto` (`perftools.profiles`, as
//! published with Go's `pprof` and read by `go tool pprof`, Perfetto's
//! pprof import, speedscope and Pyroscope), written by hand for `prost` as
//! `trace-perfetto`'s Perfetto messages are: the format is small, stable
//! since 2016, and a build with `protoc` is not wanted for it. Field
//! numbers are the published schema's.

/// A profile: its samples and everything they refer to, by id, with every
/// string an index into `string_table` (whose first entry is "").
#[derive(Clone, PartialEq, prost::Message)]
pub struct Profile {
    /// What each value of a sample is.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// The mappings the locations are in.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// The locations (one per distinct frame).
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// The functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string.
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// When the profile starts, ns since the epoch of its clock.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long it covers, ns.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// The kind of event sampled.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// Events between samples.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Strings (indices) shown with the profile.
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (an index into the string table).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// A value's kind and unit (string table indices).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ValueType {
    /// `samples`, `cpu`, `off-cpu`, ...
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// `count`, `nanoseconds`.
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// One stack and its values.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// The frames, leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels: process and thread.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// A sample's label: a string or a number.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    /// The key.
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// A string value.
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// A numeric value.
    #[prost(int64, tag = "3")]
    pub num: i64,
}

/// A mapped file (or a source file, for Python frames).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mapping {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Where it starts.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// Where it ends.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// Its offset in the file.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// The file.
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Its build id, in hex.
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Whether its locations have function names.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
}

/// One frame's place.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Location {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its mapping.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// The address (relative to the mapping's file).
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// The function (and line) there.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// A function and a line in it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Line {
    /// The function.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// The line (0: not known).
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// A function.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Function {
    /// Its id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its name as shown.
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Its name as the binary or interpreter knows it.
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Its source file.
    #[prost(int64, tag = "4")]
    pub filename: i64,
}
