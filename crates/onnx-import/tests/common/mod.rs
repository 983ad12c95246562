//! Builders for small ONNX models, encoded with prost like a real exporter.
#![allow(dead_code)]

use polycert_onnx::onnx_pb::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto,
    ValueInfoProto, attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto, type_proto,
};
use polycert_onnx::{ImportError, Imported, import_model};
use prost::Message;

pub fn floats(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Float as i32,
        float_data: data.to_vec(),
        ..Default::default()
    }
}

/// f32 weights in `raw_data` (little endian), as PyTorch exports them.
pub fn raw_floats(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Float as i32,
        raw_data: data.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

pub fn doubles(name: &str, dims: &[i64], data: &[f64], raw: bool) -> TensorProto {
    let mut t = TensorProto {
        name: name.into(),
        dims: dims.to_vec(),
        data_type: DataType::Double as i32,
        ..Default::default()
    };
    if raw {
        t.raw_data = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    } else {
        t.double_data = data.to_vec();
    }
    t
}

pub fn int64s(name: &str, data: &[i64], raw: bool) -> TensorProto {
    let mut t = TensorProto {
        name: name.into(),
        dims: vec![data.len() as i64],
        data_type: DataType::Int64 as i32,
        ..Default::default()
    };
    if raw {
        t.raw_data = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    } else {
        t.int64_data = data.to_vec();
    }
    t
}

pub fn attr_i(name: &str, i: i64) -> AttributeProto {
    AttributeProto { name: name.into(), r#type: AttributeType::Int as i32, i, ..Default::default() }
}

pub fn attr_f(name: &str, f: f32) -> AttributeProto {
    AttributeProto { name: name.into(), r#type: AttributeType::Float as i32, f, ..Default::default() }
}

pub fn attr_ints(name: &str, ints: &[i64]) -> AttributeProto {
    AttributeProto { name: name.into(), r#type: AttributeType::Ints as i32, ints: ints.to_vec(), ..Default::default() }
}

pub fn attr_s(name: &str, s: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: AttributeType::String as i32,
        s: s.as_bytes().to_vec(),
        ..Default::default()
    }
}

pub fn attr_t(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto { name: name.into(), r#type: AttributeType::Tensor as i32, t: Some(t), ..Default::default() }
}

pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: name.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

pub fn value_info(name: &str, dims: &[i64]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|&d| tensor_shape_proto::Dimension {
            value: Some(if d < 0 {
                tensor_shape_proto::dimension::Value::DimParam("N".into())
            } else {
                tensor_shape_proto::dimension::Value::DimValue(d)
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: DataType::Float as i32,
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A model with one input `x` of `in_dims` and one output `y`.
pub fn model(in_dims: &[i64], nodes: Vec<NodeProto>, inits: Vec<TensorProto>, opset: i64) -> ModelProto {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: opset }],
        producer_name: "polycert-tests".into(),
        graph: Some(GraphProto {
            name: "g".into(),
            node: nodes,
            initializer: inits,
            input: vec![value_info("x", in_dims)],
            output: vec![value_info("y", &[])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn encode(m: &ModelProto) -> Vec<u8> {
    m.encode_to_vec()
}

/// Deterministic pseudo-random values in [-1, 1) that are exact in f32.
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as i32 - (1 << 23)) as f32 / (1 << 23) as f32
        })
        .collect()
}

/// Imports `m`, panicking with the error.
pub fn import(m: &polycert_onnx::onnx_pb::ModelProto) -> Imported {
    import_model(&encode(m), "test.onnx").unwrap_or_else(|e| panic!("{e}"))
}

/// The error importing `m` gives.
pub fn import_err(m: &polycert_onnx::onnx_pb::ModelProto) -> ImportError {
    import_model(&encode(m), "bad.onnx").expect_err("import should fail")
}

/// The kinds of the imported network's nodes.
pub fn kinds(m: &Imported) -> Vec<&'static str> {
    m.network.nodes().iter().map(|n| n.op.kind()).collect()
}
