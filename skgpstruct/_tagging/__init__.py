"""What the sequence taggers share: the fit loop and sklearn surface
(:mod:`.base`), prediction (:mod:`.predict`), the decoders
(:mod:`.decoders`) and the plain CRF objective and solver that
RandomizedCRFTagger fits and GPStructTagger's validation reuses
(:mod:`.crf_objective`). Nothing here imports an estimator.
"""
