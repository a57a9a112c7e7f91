// TEMPORARY: replaced by the CLI.
#include <cstdio>
#include "attnkit/attnkit.h"
int main() { std::printf("attnkit %s\n", attnkit::version()); return 0; }
