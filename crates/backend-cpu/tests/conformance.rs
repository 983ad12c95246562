//! The shared backend conformance suite, on the CPU backend.
polycert_deeppoly::backend_conformance_tests!(polycert_backend_cpu::CpuBackend::default());
