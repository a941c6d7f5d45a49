# cursorflow python tool driver. Reads {"code", "input", "libs"} as JSON on
# stdin, runs the code as the body of a function whose parameters are the
# input's keys, and writes {"ok": true, "result": ...} or {"ok": false,
# "error": ..., "type": ..., "traceback": ...} as JSON to file descriptor 3.
# stdout and stderr belong to the user's code.
import ast, importlib, inspect, json, keyword, linecache, os, sys, traceback

FN = "<module>"  # so tracebacks read like a script's
FILENAME = "<code>"


def build(code, names):
    tree = ast.parse(code, FILENAME, "exec")
    body = tree.body or [ast.Pass()]
    args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in names], vararg=None,
                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    fields = dict(name=FN, args=args, body=body, decorator_list=[], returns=None, type_comment=None)
    if "type_params" in ast.FunctionDef._fields:
        fields["type_params"] = []
    fn = ast.FunctionDef(**fields)
    # Fall-through: hand back the locals so the driver can find `result`
    # or a `main` function.
    fn.body.append(ast.Return(value=ast.Tuple(elts=[ast.Constant(value=FN), ast.Call(
        func=ast.Name(id="locals", ctx=ast.Load()), args=[], keywords=[])], ctx=ast.Load())))
    fn.lineno, fn.col_offset = 1, 0
    mod = ast.Module(body=[fn], type_ignores=[])
    ast.fix_missing_locations(mod)
    return compile(mod, FILENAME, "exec")


def call_main(main, input_data):
    try:
        sig = inspect.signature(main)
    except (TypeError, ValueError):
        return main(input_data)
    params = list(sig.parameters.values())
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return main(**input_data)
    if len(params) == 1 and params[0].name not in input_data:
        return main(input_data)
    kwargs = {p.name: input_data[p.name] for p in params if p.name in input_data}
    return main(**kwargs)


DRIVER = sys._getframe().f_code.co_filename


def tail(e, limit=12):
    if isinstance(e, SyntaxError) and e.filename == FILENAME:
        # The code did not compile: its line and caret say it all, as
        # Python says it of a script (the frames are the driver's own
        # compiling, in ast.py).
        return "".join(traceback.format_exception_only(type(e), e)).rstrip()
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename != DRIVER]
    text = "".join(traceback.format_list(frames[-limit:]))
    text += "".join(traceback.format_exception_only(type(e), e))
    return ("Traceback (most recent call last):\n" + text).rstrip()


def main():
    out = os.fdopen(3, "w")
    req = json.load(sys.stdin)
    input_data = req.get("input") or {}
    if not isinstance(input_data, dict):
        input_data = {"input": input_data}
    # An input named input_data is that input (NoETL binds every input by
    # its name); otherwise input_data is the whole map.
    names = [k for k in input_data if isinstance(k, str) and k.isidentifier()
             and not keyword.iskeyword(k) and k != FN]
    g = {"__name__": "__main__", "__builtins__": __builtins__, "input_data": input_data}
    g.update({k: input_data[k] for k in names})
    code = req["code"]
    linecache.cache[FILENAME] = (len(code), None, code.splitlines(True), FILENAME)
    try:
        for alias, module in (req.get("libs") or {}).items():
            g[alias] = importlib.import_module(module or alias)
        exec(build(code, names), g)
        result = g[FN](**{k: input_data[k] for k in names})
        if isinstance(result, tuple) and len(result) == 2 and result[0] == FN:
            scope = result[1]
            if "result" in scope:
                result = scope["result"]
            elif callable(scope.get("main")):
                result = call_main(scope["main"], input_data)
            else:
                result = None
        payload = {"ok": True, "result": result}
        try:
            text = json.dumps(payload, default=str, allow_nan=False)
        except ValueError:
            # NaN and infinities, which JSON has no numbers for, become
            # the strings the engine records them as elsewhere.
            try:
                text = json.dumps({"ok": True, "result": finite(result)}, default=str, allow_nan=False)
            except (TypeError, ValueError):
                text = json.dumps({"ok": True, "result": repr(result)})
        except TypeError:
            text = json.dumps({"ok": True, "result": repr(result)})
    except BaseException as e:
        text = json.dumps({"ok": False, "type": type(e).__name__, "error": str(e),
                           "traceback": tail(e)})
    out.write(text)
    out.flush()


def finite(v, depth=0):
    """v with float NaN and infinities as the strings NaN, +Inf, -Inf."""
    if depth > 200:
        return v
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, float) and v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    if isinstance(v, dict):
        return {k: finite(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite(x, depth + 1) for x in v]
    return v


main()
