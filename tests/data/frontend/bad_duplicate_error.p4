// expect 4:14 error.Foo: duplicate declaration
#include <core.p4>
#include <v1model.p4>
error { Foo, Foo }
