<?php

use App\Http\Controllers\AuthController;
use App\Http\Controllers\GuestbookController;
use App\Http\Controllers\StateController;
use Illuminate\Http\Request;
use Illuminate\Support\Facades\App;
use Illuminate\Support\Facades\Route;

Route::get('/', function (Request $request) {
    $visits = $request->session()->increment('visits');

    return view('home', ['visits' => $visits]);
})->name('home');

Route::get('/guestbook', [GuestbookController::class, 'index'])->name('guestbook');
Route::post('/guestbook', [GuestbookController::class, 'store']);

Route::middleware('guest')->group(function () {
    Route::get('/login', [AuthController::class, 'show'])->name('login');
    Route::post('/login', [AuthController::class, 'login']);
});
Route::post('/logout', [AuthController::class, 'logout'])->name('logout');
Route::get('/account', [AuthController::class, 'account'])->middleware('auth')->name('account');

Route::get('/fr/hello', function (Request $request) {
    App::setLocale('fr');

    return view('hello', ['name' => $request->user()->name ?? 'guest']);
});

Route::get('/boom', function (Request $request) {
    $request->session()->put('boom', 'left by /boom');
    throw new RuntimeException('/boom failed on purpose');
});

Route::get('/client', function (Request $request) {
    return [
        'client_ip' => $request->ip(),
        'secure' => $request->secure(),
        'home' => url('/'),
    ];
});

Route::get('/state', [StateController::class, 'show']);
Route::get('/state/note/{text}', [StateController::class, 'note']);
Route::get('/state/uncommitted/{name}', [StateController::class, 'uncommitted']);
