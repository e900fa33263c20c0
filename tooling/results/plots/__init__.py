"""The plots of docs/img/ (make_all draws them all) from results/*.json, through ladder_results."""
