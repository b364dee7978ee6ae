# Layer 0: no exits, closed once at load.
#
# Threat: a program that reaches JavaScript (any JsProxy leads to `Function` and from there to `process`) or makes
# a built-in module again (_pyodide_core, _ctypes, _testcapi…) or loads code from a file. After load nothing that
# is or makes a JsProxy is left in the heap (the FFI modules emptied and dropped, JsException unbuildable, JsProxy
# subtypes without attributes), `_imp` is gone and there is no path, finder or stdlib archive to import from.

import gc
import os
import sys
import types
import weakref

# ---- layer 0: no exits ---------------------------------------------------------------------------------------------

_JS_MODULE_ROOTS = ('js', 'pyodide_js', 'pyodide', '_pyodide', '_pyodide_core')
# executor.ts (tests, the warm-up) calls pyodide.runPython, which is pyodide.code.eval_code: that module and the
# one it runs on stay, less what reaches JavaScript. Neither is importable or named anywhere a program can look.
_JS_MODULES_KEPT = {'pyodide.code': {'run_js'}, '_pyodide._base': set()}


def _close_javascript():
    """Leaves no object that is or makes a JsProxy: a JsProxy's `.constructor.constructor` is JavaScript's Function,
    and from there `process`."""
    core = sys.modules['_pyodide_core']
    jsproxy = next(kind for kind in type(sys.modules['pyodide_js']).__mro__ if kind.__base__ is object)
    modules = {name: module for name, module in sys.modules.items() if name.split('.')[0] in _JS_MODULE_ROOTS}
    _forget_copies(core)
    for name in modules:
        del sys.modules[name]
    sys.meta_path[:] = [finder for finder in sys.meta_path if type(finder).__module__.split('.')[0] not in _JS_MODULE_ROOTS]
    main = vars(sys.modules['__main__'])
    for key in [key for key, value in main.items() if any(value is module for module in modules.values())]:
        del main[key]  # the bootstrap left `_pyodide_core` there
    for name, module in modules.items():
        if not isinstance(module, types.ModuleType):
            continue  # pyodide_js: a JsProxy; dropped with sys.modules' entry
        if name in _JS_MODULES_KEPT:
            for key in _JS_MODULES_KEPT[name]:
                vars(module).pop(key, None)
        else:
            vars(module).clear()
    for kind in _subclasses(jsproxy) - {jsproxy}:  # the base is an immutable C type; its subtypes are not
        # JsException is the one JsProxy type a program could build (JsException(name, message) makes a JS Error).
        if '__new__' in vars(kind):
            kind.__new__ = staticmethod(_no_javascript)
        # And should a JsProxy of these types turn up after all, it has no attributes: no `.constructor`, no `.new`.
        kind.__getattribute__ = _no_javascript_attribute
    sys.excepthook = sys.__excepthook__  # Pyodide's hook lived in a module emptied above
    del modules, main
    gc.collect()
    left = {kind.__name__ for kind in map(type, gc.get_objects()) if issubclass(kind, jsproxy)}
    left |= {value.__name__ for value in gc.get_objects() if isinstance(value, types.BuiltinFunctionType) and value.__self__ is core}
    if left:
        raise RuntimeError(f'sandbox/exits.py: JavaScript is still reachable from Python through {sorted(left)}')


def _forget_copies(core):
    """A single-phase extension module keeps a copy of its first dict, from which `_imp.create_builtin` would make
    it again: emptied, with the module's own dict."""
    functions = [value for value in vars(core).values() if isinstance(value, types.BuiltinFunctionType)]
    holders = [holder for holder in gc.get_referrers(*functions) if isinstance(holder, dict)]
    for holder in holders:
        holder.clear()


def _no_javascript_attribute(self, name):
    raise AttributeError(f'JavaScript objects have no attributes in the sandbox (.{name})')


def _no_javascript(*_args, **_kwargs):
    raise TypeError('JavaScript objects cannot be made in the sandbox')


def _subclasses(root):
    """Every class below root (type.__subclasses__ walked iteratively)."""
    seen, stack = {root}, [root]
    while stack:
        for kind in type.__subclasses__(stack.pop()):
            if kind not in seen:
                seen.add(kind)
                stack.append(kind)
    return seen


class _ClosedImport:
    """Stands where `_imp` was in the import machinery: every further import fails, cleanly."""

    def __getattr__(self, name):
        def closed(*_args, **_kwargs):
            raise ImportError(f'the import system is closed in the sandbox (_imp.{name})')
        return closed


def _close_imports():
    """After load nothing is imported again: the modules a program may use are views of modules already loaded,
    and C code that imports lazily finds its module in sys.modules. Without `_imp` no built-in module can be
    created (_pyodide_core, _ctypes, _testcapi, _testinternalcapi…) and no file can be loaded."""
    real = sys.modules.pop('_imp')
    functions = {id(value) for value in vars(real).values() if isinstance(value, types.BuiltinFunctionType)}
    closed = _ClosedImport()
    for module in list(sys.modules.values()):
        namespace = getattr(module, '__dict__', None)
        if not isinstance(namespace, dict):
            continue
        for key, value in list(namespace.items()):
            if value is real or id(value) in functions:
                namespace[key] = closed if value is real else getattr(closed, key)
    sys.meta_path.clear()
    sys.path_hooks.clear()
    sys.path.clear()
    sys.path_importer_cache.clear()
    import zipimport
    zipimport._zip_directory_cache.clear()
    for archive in [name for name in os.listdir('/lib') if name.endswith('.zip')]:
        os.remove(f'/lib/{archive}')  # the stdlib and Pyodide's own packages: nothing reads them after load
    gone = weakref.ref(real)
    del real
    gc.collect()
    if gone() is not None:
        raise RuntimeError('sandbox/exits.py: _imp is still alive; built-in modules could be created again')
