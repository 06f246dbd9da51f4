"""The ResourceManager's core: sans-IO state machines of nodes, applications and
containers (``facade.ResourceManager`` and the parts it is made of). Nothing here touches
a socket, a thread or the wall clock: every call takes the emulated ``now``."""
