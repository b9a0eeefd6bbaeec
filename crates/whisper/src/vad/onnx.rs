//! The parts of the ONNX format (protocol buffers, fields numbered as in `onnx.proto`) that
//! reading the Silero VAD network needs: the graph's nodes, to check that a file holds the
//! network [`super::network`] builds, and its initializers, the weights. Other fields are
//! skipped by the decoder.

use prost::Message;

/// `ModelProto`: the file.
#[derive(Clone, PartialEq, Message)]
pub struct Model {
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<Graph>,
}

/// `GraphProto`: nodes in topological order and the named constant tensors they read.
#[derive(Clone, PartialEq, Message)]
pub struct Graph {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<Node>,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
}

/// `NodeProto`: one operator application.
#[derive(Clone, PartialEq, Message)]
pub struct Node {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, tag = "4")]
    pub op_type: String,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<Attribute>,
}

/// `AttributeProto`, the kinds the network's nodes use (integers, integer lists, strings).
#[derive(Clone, PartialEq, Message)]
pub struct Attribute {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(int64, tag = "3")]
    pub i: i64,
    #[prost(bytes = "vec", tag = "4")]
    pub s: Vec<u8>,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
}

/// `TensorProto`: dims, element type and the data, either typed or as little-endian bytes.
#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, tag = "8")]
    pub name: String,
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
    /// 1 (`EXTERNAL`) when the data lives in another file.
    #[prost(int32, tag = "14")]
    pub data_location: i32,
}

/// `TensorProto.DataType` values used here.
pub const FLOAT: i32 = 1;
pub const INT64: i32 = 7;

impl Model {
    /// Decodes an ONNX file's bytes; a damaged or truncated file is an error saying where
    /// the decoder stopped.
    pub fn decode_file(bytes: &[u8]) -> Result<Model, String> {
        Model::decode(bytes).map_err(|e| format!("not an ONNX model ({e})"))
    }
}

impl Node {
    /// The integer-list attribute `name`.
    pub fn ints(&self, name: &str) -> Option<&[i64]> {
        self.attribute.iter().find(|a| a.name == name).map(|a| a.ints.as_slice())
    }

    /// The integer attribute `name`.
    pub fn int(&self, name: &str) -> Option<i64> {
        self.attribute.iter().find(|a| a.name == name).map(|a| a.i)
    }

    /// The string attribute `name`.
    pub fn string(&self, name: &str) -> Option<&[u8]> {
        self.attribute.iter().find(|a| a.name == name).map(|a| a.s.as_slice())
    }
}

impl TensorProto {
    /// The elements of a float tensor, from `raw_data` or `float_data`; an error for
    /// another element type, external data, or a data length that disagrees with the dims.
    pub fn floats(&self) -> Result<Vec<f32>, String> {
        if self.data_type != FLOAT {
            return Err(format!("{} holds data type {}, expected float (1)", self.name, self.data_type));
        }
        let values: Vec<f32> = if self.data_location == 1 {
            return Err(format!("{} keeps its data in another file; only self-contained files load", self.name));
        } else if !self.raw_data.is_empty() {
            if !self.raw_data.len().is_multiple_of(4) {
                return Err(format!("{} has {} data bytes, not whole floats", self.name, self.raw_data.len()));
            }
            self.raw_data.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
        } else {
            self.float_data.clone()
        };
        let expected = self.elements()?;
        if values.len() != expected {
            return Err(format!("{} has {} values for its dims {:?} ({expected})", self.name, values.len(), self.dims));
        }
        Ok(values)
    }

    /// The elements of an int64 tensor (`raw_data` or `int64_data`).
    pub fn int64s(&self) -> Result<Vec<i64>, String> {
        if self.data_type != INT64 {
            return Err(format!("{} holds data type {}, expected int64 (7)", self.name, self.data_type));
        }
        let values: Vec<i64> = if !self.raw_data.is_empty() {
            if !self.raw_data.len().is_multiple_of(8) {
                return Err(format!("{} has {} data bytes, not whole int64s", self.name, self.raw_data.len()));
            }
            self.raw_data
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
                .collect()
        } else {
            self.int64_data.clone()
        };
        if values.len() != self.elements()? {
            return Err(format!("{} has {} values for its dims {:?}", self.name, values.len(), self.dims));
        }
        Ok(values)
    }

    /// The element count the dims give.
    fn elements(&self) -> Result<usize, String> {
        self.dims.iter().try_fold(1usize, |n, &d| {
            usize::try_from(d)
                .ok()
                .and_then(|d| n.checked_mul(d))
                .ok_or_else(|| format!("{} has dims {:?}", self.name, self.dims))
        })
    }
}
