package main

// version is pagepipe's version, which `pagepipe -v` prints. It is the one
// place the version is written: packaging/deb.sh and packaging/rpm.sh read
// this line for the packages' versions.
const version = "0.1.0"
