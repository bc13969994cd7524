# make check-images: build the shipped image definitions other than python
# (which make check builds) with a private sbxd and report each build's
# state, time, size and versions (tests/images/run.sh; docs/images.md).
# Needs root and the network. Called by .ci/run when CI_IMAGES=yes.
#   IMAGES, IMAGE_CACHE: see tests/images/run.sh
.PHONY: check-images
check-images: all
	@tests/images/run.sh
