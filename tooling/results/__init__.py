"""Results and plots: reading results/*.json (ladder_results), the generated tables in the docs
(update_results, estimate_gpu_classes), profile tables (profile_table) and the plots (plots)."""
