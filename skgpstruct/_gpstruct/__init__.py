"""GPStructTagger's room: the estimator (:mod:`.tagger`), what the two forms'
fits share (:mod:`.fitting`), its two forms (:mod:`.weight_space_form`,
:mod:`.inducing_form`), its prediction
(:mod:`.predict`), its information gain (:mod:`.information_gain`) and the
validation of its prior (:mod:`.prior_variance_cv`, :mod:`.posterior_cv`).
"""

from .tagger import GPStructTagger

__all__ = ["GPStructTagger"]
