// Package packaging holds the tests of pagepipe's packages, which the
// scripts beside it build (docs/packaging.md): `make deb` (deb.sh) makes
// pagepipe for amd64 and arm64 and pagepipe-as-makedumpfile, which diverts
// Debian's makedumpfile; `make rpm` (rpm.sh, pagepipe.spec) makes the same
// two as RPMs. The tests check what the packages hold and what lintian
// says of them, and install them into a minimal Debian system
// (fixtures/make-debian-root.sh) beside kdump-tools and makedumpfile, where
// kdump-config saves a real vmcore through pagepipe and removing the
// diverting package gives Debian's makedumpfile back.
package packaging
