"""The bundled data sets: real text that installs with the project (the standard library and our
dependencies), so a fresh machine trains and evaluates offline; and the package pairs built the same way."""
