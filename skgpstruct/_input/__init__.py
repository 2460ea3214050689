"""Input handling: checks of sequence inputs (:mod:`.validation`), the
stacked training data (:mod:`.sequences`), the checks of the chain
kernels' arrays (:mod:`.arrays`) and text decoding (:mod:`.text`). The
bottom layer: it imports nothing else of the package.
"""
