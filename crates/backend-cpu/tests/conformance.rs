//! The shared backend conformance suite, on the CPU backend.
polycert_deeppoly::backend_conformance_tests!(polycert_backend_cpu::CpuBackend::default());

/// The CPU's default batch follows the network's size: 32,768 neurons'
/// worth of properties, at least 8 (256x6 MNIST), at most 128.
#[test]
fn default_batch_follows_the_network_size() {
    use polycert_deeppoly::{Analyzer, Network, Op, Options, Shape};
    let be = polycert_backend_cpu::CpuBackend::default();
    let mlp = |inputs: usize, width: usize, layers: usize| {
        let mut n = Network::new(Shape::flat(inputs));
        let mut at = 0;
        for l in 0..layers {
            let fan_in = if l == 0 { inputs } else { width };
            let w = (0..fan_in * width).map(|i| if i % 3 == 0 { 0.5 } else { -0.25 }).collect();
            let d = n.push(format!("d{l}"), Op::Dense { weight: w, bias: vec![0.0; width], out: width }, &[at]);
            at = n.push(format!("r{l}"), Op::Relu, &[d.expect("dense")]).expect("relu");
        }
        n.push("y", Op::Dense { weight: vec![1.0; width * 2], bias: vec![0.0; 2], out: 2 }, &[at]).expect("out");
        n
    };
    let capacity = |n: &Network| Analyzer::<_, f64>::new(n, &be, Options::default()).expect("prepare").batch_capacity();
    // 5 + 6·(50 + 50) + 2 = 607 neurons: 32,768 / 607 = 53 (ACAS Xu-sized).
    assert_eq!(capacity(&mlp(5, 50, 6)), 53);
    // 784 + 6·512 + 2 = 3,858 neurons: the hint, 8.
    assert_eq!(capacity(&mlp(784, 256, 6)), 8);
    // 2 + 2·4 + 2 neurons: capped at 128.
    assert_eq!(capacity(&mlp(2, 2, 2)), 128);
    // Given, the batch is the caller's.
    let given = Options::default().with(|o| o.passes.batch = Some(3));
    assert_eq!(Analyzer::<_, f64>::new(&mlp(5, 50, 6), &be, given).expect("prepare").batch_capacity(), 3);
}
