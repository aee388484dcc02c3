// Versions from distribution filenames and PEP 440 canonical forms.
#include "proxy/pypi/version.h"

#include <gtest/gtest.h>

namespace capsule::proxy::pypi {
namespace {

TEST(VersionFromFilename, WheelsEggsSdistsInstallers) {
  struct Case {
    const char* filename;
    const char* project;
    const char* version;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"numpy-1.26.4-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "numpy", "1.26.4"},
           {"demo_pkg-1.0-1-py3-none-any.whl", "demo-pkg", "1.0"},  // build tag
           {"Demo_Pkg-2.0rc1-py2.py3-none-any.WHL", "demo-pkg", "2.0rc1"},
           {"demo-1.0-py3.whl", "demo", ""},  // too few parts
           {"demo-pkg-1.0.tar.gz", "demo-pkg", "1.0"},
           {"Demo.Pkg-1.0.post1.tar.gz", "demo-pkg", "1.0.post1"},
           {"demo_pkg-1.0.zip", "Demo.Pkg", "1.0"},
           {"demo-pkg-1.0.tar.bz2", "demo-pkg", "1.0"},
           {"demo-pkg-1.0.tgz", "demo-pkg", "1.0"},
           {"demo-pkg-1.0.tar.xz", "demo-pkg", "1.0"},
           {"demo-pkg-1.0.tar", "demo-pkg", "1.0"},
           {"py-2to3-1.0.tar.gz", "py-2to3", "1.0"},       // a name part with "-<digit>"
           {"renamed-later-3.1.tar.gz", "other", "3.1"},   // name mismatch: first "-<digit>"
           {"nodigits.tar.gz", "other", ""},
           {"setuptools-0.6c11-py2.7.egg", "setuptools", "0.6c11"},
           {"Twisted-8.2.0.win32-py2.5.exe", "twisted", "8.2.0"},
           {"pywin32-214.win-amd64-py2.6.exe", "pywin32", "214"},
           {"numpy-1.9.2-win32-superpack-python2.7.exe", "numpy", "1.9.2"},
           {"demo-1.0.win32.msi", "demo", "1.0"},
           {"demo-1.0.rpm", "demo", ""},
           {"", "demo", ""},
       })
    EXPECT_EQ(version_from_filename(c.filename, c.project), c.version) << c.filename;
}

TEST(CanonicalVersion, Pep440Spellings) {
  struct Case {
    const char* spelling;
    const char* canonical;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"1.0", "1"},
           {"1.0.0", "1"},
           {"v1.0", "1"},
           {"V2.10.0", "2.10"},
           {" 1.0 ", "1"},
           {"01.002", "1.2"},
           {"0", "0"},
           {"0!1.0", "1"},
           {"2!1.0", "2!1"},
           {"1.0.0rc1", "1rc1"},
           {"1.0.0-RC.1", "1rc1"},
           {"1.0c1", "1rc1"},
           {"1.0pre1", "1rc1"},
           {"1.0preview_2", "1rc2"},
           {"1.0alpha", "1a0"},
           {"1.0-ALPHA.1", "1a1"},
           {"1.0b2", "1b2"},
           {"1.0beta2", "1b2"},
           {"1.0-1", "1.post1"},
           {"1.0_post1", "1.post1"},
           {"1.0-r", "1.post0"},
           {"1.0rev3", "1.post3"},
           {"1.0.dev", "1.dev0"},
           {"1.0-dev.4", "1.dev4"},
           {"1.0a1.post2.dev3", "1a1.post2.dev3"},
           {"1.0+Ubuntu-1", "1+ubuntu.1"},
           {"1.0+abc.007", "1+abc.7"},
           {"99999999999999999999999.0", "99999999999999999999999"},
           // Not PEP 440: lowercased and trimmed only.
           {"Not A Version", "not a version"},
           {"1.0+", "1.0+"},
           {"1.0-foo", "1.0-foo"},
           {"", ""},
       })
    EXPECT_EQ(canonical_version(c.spelling), c.canonical) << c.spelling;
}

}  // namespace
}  // namespace capsule::proxy::pypi
