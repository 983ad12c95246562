//! The macros that instantiate the suite in a backend crate's tests.

/// Instantiates the conformance suite for a backend expression, once per
/// arithmetic (modules `point` and `interval`); an attribute before the
/// expression goes on every test (the CUDA suite's `ignore` without a GPU).
#[macro_export]
macro_rules! backend_conformance_tests {
    (#[$m:meta] $make:expr) => {
        mod point {
            $crate::backend_conformance_suite!(
                #[$m]
                $make,
                $crate::Arith::Point
            );
            #[test]
            #[$m]
            fn constants_round_down() {
                $crate::conformance::constants_round_down(&$make);
            }
            #[test]
            #[$m]
            fn concretize_add_matches_parts_f64() {
                $crate::conformance::concretize_add_matches_parts::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn concretize_add_matches_parts_f32() {
                $crate::conformance::concretize_add_matches_parts::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn gather_and_scatter_f64() {
                $crate::conformance::gather_and_scatter::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn gather_and_scatter_f32() {
                $crate::conformance::gather_and_scatter::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn relaxed_bound_matches_host_f64() {
                $crate::conformance::relaxed_bound_matches_host::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn relaxed_bound_matches_host_f32() {
                $crate::conformance::relaxed_bound_matches_host::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn gradients_match_finite_differences_f64() {
                $crate::conformance::gradients_match_finite_differences::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn gradients_match_finite_differences_f32() {
                $crate::conformance::gradients_match_finite_differences::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn inference_matches_host_f64() {
                $crate::conformance::inference_matches_host::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn inference_matches_host_f32() {
                $crate::conformance::inference_matches_host::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn attack_finds_hidden_counterexamples_f64() {
                $crate::conformance::attack_finds_hidden_counterexamples::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn attack_finds_hidden_counterexamples_f32() {
                $crate::conformance::attack_finds_hidden_counterexamples::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn input_splitting_proves_f64() {
                $crate::conformance::input_splitting_proves::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn input_splitting_proves_f32() {
                $crate::conformance::input_splitting_proves::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn relu_splitting_proves_f64() {
                $crate::conformance::relu_splitting_proves::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn relu_splitting_proves_f32() {
                $crate::conformance::relu_splitting_proves::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn optimised_slopes_prove_f64() {
                $crate::conformance::optimised_slopes_prove::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn optimised_slopes_prove_f32() {
                $crate::conformance::optimised_slopes_prove::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn exact_leaf_corner_falsifies_f64() {
                $crate::conformance::exact_leaf_corner_falsifies::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn exact_leaf_corner_falsifies_f32() {
                $crate::conformance::exact_leaf_corner_falsifies::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn restarts_falsify_a_sliver_f64() {
                $crate::conformance::restarts_falsify_a_sliver::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn restarts_falsify_a_sliver_f32() {
                $crate::conformance::restarts_falsify_a_sliver::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn corner_attack_falsifies_f64() {
                $crate::conformance::corner_attack_falsifies::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn corner_attack_falsifies_f32() {
                $crate::conformance::corner_attack_falsifies::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn intermediate_slopes_prove_f64() {
                $crate::conformance::intermediate_slopes_prove::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn intermediate_slopes_prove_f32() {
                $crate::conformance::intermediate_slopes_prove::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn stabilize_clamps_provable_ends_f64() {
                $crate::conformance::stabilize_clamps_provable_ends::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn stabilize_clamps_provable_ends_f32() {
                $crate::conformance::stabilize_clamps_provable_ends::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn stabilize_continues_from_its_start_f64() {
                $crate::conformance::stabilize_continues_from_its_start::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn stabilize_continues_from_its_start_f32() {
                $crate::conformance::stabilize_continues_from_its_start::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn stabilize_from_a_start_passes_spent_layers_f64() {
                $crate::conformance::stabilize_from_a_start_passes_spent_layers::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn stabilize_from_a_start_passes_spent_layers_f32() {
                $crate::conformance::stabilize_from_a_start_passes_spent_layers::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn stabilize_modes_agree_f64() {
                $crate::conformance::stabilize_modes_agree::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn stabilize_modes_agree_f32() {
                $crate::conformance::stabilize_modes_agree::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn refinement_uses_layer_slopes_f64() {
                $crate::conformance::refinement_uses_layer_slopes::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn refinement_uses_layer_slopes_f32() {
                $crate::conformance::refinement_uses_layer_slopes::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn host_rows_search_agrees_f64() {
                $crate::conformance::host_rows_search_agrees::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn batch_streams_outcomes_f64() {
                $crate::conformance::batch_streams_outcomes::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn search_workers_agree_f64() {
                $crate::conformance::search_workers_agree::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn gated_leaves_skip_a_layer_f64() {
                $crate::conformance::gated_leaves_skip_a_layer::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn gated_leaves_skip_a_layer_f32() {
                $crate::conformance::gated_leaves_skip_a_layer::<_, f32>(&$make);
            }
            #[test]
            #[$m]
            fn batch_equals_alone_f64() {
                $crate::conformance::batch_equals_alone::<_, f64>(&$make);
            }
            #[test]
            #[$m]
            fn batch_equals_alone_f32() {
                $crate::conformance::batch_equals_alone::<_, f32>(&$make);
            }
        }
        mod interval {
            $crate::backend_conformance_suite!(
                #[$m]
                $make,
                $crate::Arith::Interval
            );
            #[test]
            #[$m]
            fn sparse_conv_equals_dense_f32() {
                $crate::conformance::sparse_equals_dense::<_, f32>(&$make, 5, $crate::Arith::Interval);
            }
        }
    };
    // Listed second: an expression may itself start with an attribute.
    ($make:expr) => {
        // `cfg_attr(any(), …)`: never ignored.
        $crate::backend_conformance_tests!(
            #[cfg_attr(any(), ignore)]
            $make
        );
    };
}

/// The suite for one arithmetic (used by [`backend_conformance_tests`]).
#[macro_export]
macro_rules! backend_conformance_suite {
    (#[$m:meta] $make:expr, $arith:expr) => {
        #[test]
        #[$m]
        fn zero_margin_is_never_verified_f64() {
            $crate::conformance::zero_margin_is_never_verified::<_, f64>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn zero_margin_is_never_verified_f32() {
            $crate::conformance::zero_margin_is_never_verified::<_, f32>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn softmax_margin_decides_f64() {
            $crate::conformance::softmax_margin_decides::<_, f64>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn two_two_example_f32() {
            $crate::conformance::two_two_example::<_, f32>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn two_two_example_f64() {
            $crate::conformance::two_two_example::<_, f64>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn sparse_conv_equals_dense_f64() {
            for seed in 1..4 {
                $crate::conformance::sparse_equals_dense::<_, f64>(&$make, seed, $arith);
            }
        }
        #[test]
        #[$m]
        fn early_termination_same_verdicts_f64() {
            $crate::conformance::early_termination_same_verdicts::<_, f64>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn early_termination_same_verdicts_f32() {
            $crate::conformance::early_termination_same_verdicts::<_, f32>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn late_checks_same_bounds_f64() {
            $crate::conformance::late_checks_same_bounds::<_, f64>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn late_checks_same_bounds_f32() {
            $crate::conformance::late_checks_same_bounds::<_, f32>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn overflow_gives_no_bounds_f32() {
            $crate::conformance::overflow_gives_no_bounds::<_, f32>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn overflow_gives_no_bounds_f64() {
            $crate::conformance::overflow_gives_no_bounds::<_, f64>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn attack_first_consistent_f64() {
            $crate::conformance::attack_first_consistent::<_, f64>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn points_inside_bounds_f64() {
            $crate::conformance::points_inside_bounds::<_, f64>(&$make, $arith);
        }
        #[test]
        #[$m]
        fn points_inside_bounds_f32() {
            $crate::conformance::points_inside_bounds::<_, f32>(&$make, $arith);
        }
    };
}
