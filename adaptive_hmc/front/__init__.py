"""What a user meets: ``sample()`` for any log density, the scikit-learn style
estimators, configured experiments and density runs, sweeps, the reports,
plots and exports of finished runs, the config templates and the CLI."""
