//! Several GPUs behind one backend (issue 47): workers and search forks
//! go round the GPUs given, and an analysis on another GPU gives the
//! first GPU's verdict and bounds. Needs two GPUs: ignored unless asked
//! for (`--ignored`), and then it fails, never passes, with fewer.

use polycert_backend_cuda::CudaBackend;
use polycert_deeppoly::base::budget::Budget;
use polycert_deeppoly::base::rng::SplitMix;
use polycert_deeppoly::testnets::{random_mlp, random_resnet};
use polycert_deeppoly::{Analyzer, InputBox, LoHi, Options, Property, RuntimeOps, Shape};

fn two_gpus() -> CudaBackend {
    let n = CudaBackend::visible_gpus().expect("a CUDA driver");
    assert!(n >= 2, "this test needs two GPUs, {n} visible");
    CudaBackend::on_devices(&[0, 1]).expect("GPUs 0 and 1")
}

fn ordinal(b: &CudaBackend) -> usize {
    b.device().ctx.ordinal()
}

#[test]
#[ignore = "needs two CUDA GPUs: run with --ignored on such a machine"]
fn workers_and_forks_go_round_the_gpus() {
    let be = two_gpus();
    assert_eq!((be.gpu_count(), ordinal(&be)), (2, 0));
    let on: Vec<usize> = (0..4).map(|k| ordinal(&be.worker_on(k).expect("worker"))).collect();
    assert_eq!(on, [0, 1, 0, 1]);
    let forks: Vec<usize> = (0..3).map(|_| ordinal(&be.fork().expect("fork").expect("a fork"))).collect();
    assert_eq!(forks, [1, 0, 1]);
    assert_eq!(RuntimeOps::search_workers(&be), 8);
}

#[test]
#[ignore = "needs two CUDA GPUs: run with --ignored on such a machine"]
fn another_gpu_gives_the_same_bounds() {
    let be = two_gpus();
    let other = be.worker_on(1).expect("GPU 1");
    assert_eq!(ordinal(&other), 1);
    let mut rng = SplitMix(7);
    for k in 0..6 {
        let net = if k % 2 == 0 {
            random_mlp(&mut rng, &[20, 64, 64, 5])
        } else {
            random_resnet(&mut rng, Shape::new(2, 9, 9), 4, 5)
        };
        let c: Vec<f64> = (0..net.input_shape().numel()).map(|_| rng.unit()).collect();
        let eps = 0.004 * (1 + k % 3) as f64;
        let input = InputBox::new(c.iter().map(|v| v - eps).collect(), c.iter().map(|v| v + eps).collect()).unwrap();
        let y = polycert_deeppoly::base::eval::eval::<f64>(&net, &input.centre());
        let label = (0..y.len()).max_by(|&i, &j| y[i].total_cmp(&y[j])).unwrap();
        let prop = Property::robustness("p", input.clone(), label, y.len()).unwrap();
        let a = Analyzer::<_, f64>::new(&net, &be, Options::default()).unwrap();
        let b = Analyzer::<_, f64>::new(&net, &other, Options::default()).unwrap();
        let (ba, bb) =
            (a.node_bounds(&input, Budget::UNLIMITED).unwrap(), b.node_bounds(&input, Budget::UNLIMITED).unwrap());
        for (LoHi { lo: la, hi: ha }, LoHi { lo: lb, hi: hb }) in ba.iter().zip(&bb) {
            let close = |x: &f64, y: &f64| (x - y).abs() <= 1e-9 * (1.0 + x.abs().max(y.abs()));
            assert!(la.iter().zip(lb).all(|(x, y)| close(x, y)) && ha.iter().zip(hb).all(|(x, y)| close(x, y)));
        }
        let (ra, rb) = (a.analyze(&prop).unwrap(), b.analyze(&prop).unwrap());
        assert_eq!(ra.verdict, rb.verdict, "net {k}");
    }
}
