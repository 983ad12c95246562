//! ONNX and VNNLIB import: turns ONNX models into the polycert IR and
//! VNNLIB files into properties. Not implemented yet: see the import issue.
