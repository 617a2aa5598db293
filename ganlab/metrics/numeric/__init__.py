"""The numeric kernels the scores share; no score lives here, and nothing here imports a score.

* :mod:`~ganlab.metrics.numeric.blocks`: input checks, block sizing, blocked distances, Gram matrices and symmetric
  eigendecompositions (through NumPy's and SciPy's BLAS/LAPACK for float64 on the CPU);
* :mod:`~ganlab.metrics.numeric.workers`: the CPU worker pool the blocked passes run on;
* :mod:`~ganlab.metrics.numeric.order`: order-free subsets and splits (a score of part of its samples does not
  depend on their order);
* :mod:`~ganlab.metrics.numeric.kmeans`: k-means (the public :func:`~ganlab.metrics.numeric.kmeans.kmeans` and
  :func:`~ganlab.metrics.numeric.kmeans.assign`, with k-means++ seeding), whose iterations take one of three routes,
  chosen by size, each measured to pay where it is taken (``docs/performance.md``):
  :mod:`~ganlab.metrics.numeric.lloyd` (Lloyd's iterations in torch: any device, several threads, large ``N k``),
  :mod:`~ganlab.metrics.numeric.lloyd_numpy` (the same iterations in NumPy when one thread runs an E-step of one
  block) and :mod:`~ganlab.metrics.numeric.hamerly` (Hamerly's bounds, once few samples still move); the
  reseeding of empty clusters they share is :mod:`~ganlab.metrics.numeric.reseed`.
"""
