"""What the sequence taggers share: the fit loop and sklearn surface
(:mod:`.base`), prediction (:mod:`.predict`), the decoders
(:mod:`.decoders`) and the plain CRF that RandomizedCRFTagger fits and
GPStructTagger's validation reuses: its objective (:mod:`.crf_objective`)
and its solver (:mod:`.crf_solver`). Nothing here imports an estimator.
"""
