"""skyward-sklearn: joblib and scikit-learn on a pool."""
